// TODO(console): the DeploymentDetail page.
export default function DeploymentDetail(props) {
  return (
    <section>
      <h1>DeploymentDetail</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
