// TODO(console): the Deployments page.
export default function Deployments(props) {
  return (
    <section>
      <h1>Deployments</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
