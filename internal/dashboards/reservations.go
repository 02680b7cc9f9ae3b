package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// pl filters a series by the plan variable.
const pl = `{plan=~"$plan"}`

// Reservations is the dashboard of training plans (flexible capacity
// reservations): their states, the instance-hours booked and used, the
// time and money involved, and the endpoints relying on them.
func Reservations() (dashboard.Dashboard, error) {
	b := newDashboard(ReservationsUID, "capstan / Reservations",
		"Training plans: states, reserved vs used instance-hours, time left, upfront fees and reserved instances in use.").
		WithVariable(labelVar("plan", "Training plan", "capstan_training_plan_reserved_instance_hours"))

	b.WithRow(dashboard.NewRowBuilder("Plans"))
	b.WithPanel(single("Training plans by state", "Training plans by status (Pending, Scheduled, Active, Expired, Failed).", "short",
		q(`sum by (status) (capstan_training_plans)`, "{{status}}")).Span(12))
	b.WithPanel(single("Time left", "Time until each plan's reservation ends.", "s",
		q(`min by (plan) (capstan_training_plan_remaining_seconds`+pl+`)`, "{{plan}}")))
	b.WithPanel(single("Upfront fee", "What each plan cost when it was bought.", "currencyUSD",
		q(`sum by (plan) (capstan_training_plan_upfront_fee_usd`+pl+`)`, "{{plan}}")))

	b.WithRow(dashboard.NewRowBuilder("Instance-hours"))
	b.WithPanel(series("Reserved vs used instance-hours",
		"Instance-hours each plan reserves, and those endpoints have used on it so far.", "suffix: h",
		q(`sum by (plan) (capstan_training_plan_reserved_instance_hours`+pl+`)`, "{{plan}} reserved"),
		q(`sum by (plan) (capstan_plan_instance_hours_total`+pl+`)`, "{{plan}} used")))
	b.WithPanel(series("Reservation utilisation",
		"Used instance-hours as a share of those reserved.", "percentunit",
		q(`sum by (plan) (capstan_plan_instance_hours_total`+pl+`) / sum by (plan) (capstan_training_plan_reserved_instance_hours`+pl+`)`, "{{plan}}")))

	b.WithRow(dashboard.NewRowBuilder("Reserved instances"))
	b.WithPanel(series("Reserved instances in use and available",
		"Plan instances held by endpoints (in use) and free for endpoints (available; 0 once a plan has expired).", "short",
		q(`sum by (plan) (capstan_reserved_instances_in_use`+pl+`)`, "{{plan}} in use"),
		q(`sum by (plan) (capstan_reserved_instances_available`+pl+`)`, "{{plan}} available")))
	b.WithPanel(series("Reserved instances by type and zone",
		"Instances booked by Active training plans, by instance type and availability zone.", "short",
		q(`sum by (instance_type, zone) (capstan_reserved_instances)`, "{{instance_type}} {{zone}}")))
	b.WithPanel(grid("Endpoints on an expired plan",
		"Endpoints still placed on a training plan that has expired: they need another plan or on-demand capacity.",
		q(`max by (endpoint, plan) (capstan_endpoint_on_expired_plan`+pl+`) == 1`, "")).Span(24))
	return finish(b)
}
