// TODO(console): the PlanNew page.
export default function PlanNew(props) {
  return (
    <section>
      <h1>PlanNew</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
