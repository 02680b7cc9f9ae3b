// TODO(console): the Endpoints page.
export default function Endpoints(props) {
  return (
    <section>
      <h1>Endpoints</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
