// TODO(console): the Plans page.
export default function Plans(props) {
  return (
    <section>
      <h1>Plans</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
