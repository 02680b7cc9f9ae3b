// TODO(console): the ClusterDetail page.
export default function ClusterDetail(props) {
  return (
    <section>
      <h1>ClusterDetail</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
