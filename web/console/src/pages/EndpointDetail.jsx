// TODO(console): the EndpointDetail page.
export default function EndpointDetail(props) {
  return (
    <section>
      <h1>EndpointDetail</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
