// TODO(console): the Clusters page.
export default function Clusters(props) {
  return (
    <section>
      <h1>Clusters</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
