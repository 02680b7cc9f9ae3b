// TODO(console): the PlanDetail page.
export default function PlanDetail(props) {
  return (
    <section>
      <h1>PlanDetail</h1>
      <p class="empty">Not built yet.</p>
    </section>
  );
}
