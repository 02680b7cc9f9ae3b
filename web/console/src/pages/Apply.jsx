// TODO(console): the Apply page.
export default function Apply(props) {
  return (
    <section>
      <h1>Apply</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
