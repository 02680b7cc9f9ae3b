package sagemaker

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/endpoint"
)

var (
	patPlanName     = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$`)
	patOfferingID   = regexp.MustCompile(`^[a-z0-9\-]+$`)
	planStatuses    = []string{"Pending", "Active", "Scheduled", "Expired", "Failed"}
	reservableTypes = []string{"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5.4xlarge", "ml.p5e.48xlarge",
		"ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.p6e-gb200.36xlarge", "ml.trn1.32xlarge", "ml.trn2.48xlarge"}
)

const (
	patPlanNameText   = `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}`
	patOfferingIDText = `^[a-z0-9\-]+`
)

func (a *API) planArn(name string) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:training-plan/%s", a.opts.Region, a.opts.AccountID, strings.ToLower(name))
}

// foreignPlan says why a training plan ARN of another account or region
// than this server's names no plan the caller may use, as SageMaker
// refuses a plan the caller does not own; it is "" for an ARN of this
// account and region, and for a string that is no SageMaker ARN at all
// (the members' patterns refuse those). The caller's own plans are the
// only ones capstan keeps, so resolving such an ARN by its name alone
// would run on, and echo, a plan it does not name.
func (a *API) foreignPlan(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" || parts[2] != "sagemaker" || parts[3] == a.opts.Region && parts[4] == a.opts.AccountID {
		return ""
	}
	return fmt.Sprintf("%s is not a training plan of this account (%s) in %s: only the caller's own plans can be used",
		arn, a.opts.AccountID, a.opts.Region)
}

func (a *API) plans() (*capacity.Calendar, error) {
	if a.opts.Capacity == nil {
		return nil, awsjson.Errorf(http.StatusBadRequest, CodeUnknownOperation, "Training plans are not enabled on this server.")
	}
	return a.opts.Capacity, nil
}

type searchOfferingsInput struct {
	InstanceType     string   `json:"InstanceType"`
	InstanceCount    *int     `json:"InstanceCount"`
	UltraServerType  string   `json:"UltraServerType"`
	UltraServerCount *int     `json:"UltraServerCount"`
	StartTimeAfter   *Epoch   `json:"StartTimeAfter"`
	EndTimeBefore    *Epoch   `json:"EndTimeBefore"`
	DurationHours    *int64   `json:"DurationHours"`
	TargetResources  []string `json:"TargetResources"`
	TrainingPlanArn  string   `json:"TrainingPlanArn"`
}

type reservedCapacityOffering struct {
	ReservedCapacityType string `json:"ReservedCapacityType,omitempty"`
	InstanceType         string `json:"InstanceType"`
	InstanceCount        int    `json:"InstanceCount"`
	AvailabilityZone     string `json:"AvailabilityZone,omitempty"`
	planSpan
}

// planSpan is how long a reservation lasts and when, as offerings, plans and
// their reserved capacities all word it.
type planSpan struct {
	DurationHours   int    `json:"DurationHours"`
	DurationMinutes int    `json:"DurationMinutes"`
	StartTime       *Epoch `json:"StartTime,omitempty"`
	EndTime         *Epoch `json:"EndTime,omitempty"`
}

func spanOf(hours int, start, end time.Time) planSpan {
	return planSpan{DurationHours: hours, StartTime: awsjson.EpochOf(start), EndTime: awsjson.EpochOf(end)}
}

type trainingPlanOffering struct {
	TrainingPlanOfferingId    string                     `json:"TrainingPlanOfferingId"`
	TargetResources           []string                   `json:"TargetResources"`
	RequestedStartTimeAfter   *Epoch                     `json:"RequestedStartTimeAfter,omitempty"`
	RequestedEndTimeBefore    *Epoch                     `json:"RequestedEndTimeBefore,omitempty"`
	DurationHours             int                        `json:"DurationHours"`
	DurationMinutes           int                        `json:"DurationMinutes"`
	UpfrontFee                string                     `json:"UpfrontFee"`
	CurrencyCode              string                     `json:"CurrencyCode"`
	ReservedCapacityOfferings []reservedCapacityOffering `json:"ReservedCapacityOfferings"`
}

func (a *API) searchTrainingPlanOfferings(_ context.Context, body []byte) (any, error) {
	cal, err := a.plans()
	if err != nil {
		return nil, err
	}
	var in searchOfferingsInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.enum(in.InstanceType, "instanceType", reservableTypes...)
	ve.IntRange(in.InstanceCount, 0, 256, "instanceCount")
	if in.DurationHours != nil && (*in.DurationHours < 1 || *in.DurationHours > 87600) {
		c := "Member must have value greater than or equal to 1"
		if *in.DurationHours > 87600 {
			c = "Member must have value less than or equal to 87600"
		}
		ve.Add(*in.DurationHours, "durationHours", c)
	}
	if in.TargetResources != nil {
		ve.listLen(len(in.TargetResources), 1, 4, "targetResources")
	}
	for i, t := range in.TargetResources {
		ve.enum(t, fmt.Sprintf("targetResources.%d.member", i+1), capacity.TargetResources...)
	}
	if in.UltraServerType != "" || in.UltraServerCount != nil {
		ve.Add(in.UltraServerType, "ultraServerType", "UltraServer reservations are not supported by capstan")
	}
	if in.TrainingPlanArn != "" {
		ve.Add(in.TrainingPlanArn, "trainingPlanArn", "Training plan extensions are not supported by capstan")
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	// What the service needs beyond the model's (all optional) members.
	switch {
	case in.InstanceType == "":
		return nil, awsjson.Validationf("InstanceType is required: capstan searches offerings of one instance type (one of %s).", strings.Join(reservableTypes, ", "))
	case in.InstanceCount == nil || *in.InstanceCount < 1:
		return nil, awsjson.Validationf("InstanceCount must be at least 1.")
	case in.DurationHours == nil:
		return nil, awsjson.Validationf("DurationHours is required.")
	case in.StartTimeAfter != nil && in.EndTimeBefore != nil && !in.StartTimeAfter.Before(in.EndTimeBefore.Time):
		return nil, awsjson.Validationf("StartTimeAfter (%s) must be before EndTimeBefore (%s).",
			in.StartTimeAfter.UTC().Format(time.RFC3339), in.EndTimeBefore.UTC().Format(time.RFC3339))
	}
	if _, err := a.opts.Catalog.InstanceType(in.InstanceType); err != nil {
		return nil, awsjson.Validationf("Instance type %s is not in the catalog.", in.InstanceType)
	}
	targets := in.TargetResources
	if len(targets) == 0 {
		targets = []string{"training-job"}
	}
	q := capacity.Query{InstanceType: in.InstanceType, Count: *in.InstanceCount,
		Duration: time.Duration(*in.DurationHours) * time.Hour, TargetResources: targets}
	if in.StartTimeAfter != nil {
		q.StartAfter = in.StartTimeAfter.Time
	}
	if in.EndTimeBefore != nil {
		q.EndBefore = in.EndTimeBefore.Time
	}
	offers, err := cal.Search(q)
	if err != nil {
		return nil, err
	}
	out := struct {
		TrainingPlanOfferings []trainingPlanOffering `json:"TrainingPlanOfferings"`
	}{TrainingPlanOfferings: []trainingPlanOffering{}}
	for _, o := range offers {
		w := trainingPlanOffering{TrainingPlanOfferingId: o.ID, TargetResources: o.TargetResources,
			RequestedStartTimeAfter: awsjson.EpochOf(o.RequestedStartAfter), RequestedEndTimeBefore: awsjson.EpochOf(o.RequestedEndBefore),
			DurationHours: o.DurationHours, UpfrontFee: o.UpfrontFee, CurrencyCode: o.CurrencyCode}
		for _, r := range o.Capacities {
			w.ReservedCapacityOfferings = append(w.ReservedCapacityOfferings, reservedCapacityOffering{
				InstanceType: o.InstanceType, InstanceCount: r.Count, AvailabilityZone: r.Zone,
				planSpan: spanOf(o.DurationHours, o.Start, o.End)})
		}
		out.TrainingPlanOfferings = append(out.TrainingPlanOfferings, w)
	}
	return out, nil
}

func (a *API) createTrainingPlan(_ context.Context, body []byte) (any, error) {
	cal, err := a.plans()
	if err != nil {
		return nil, err
	}
	var in struct {
		TrainingPlanName                 *string        `json:"TrainingPlanName"`
		TrainingPlanOfferingId           *string        `json:"TrainingPlanOfferingId"`
		SpareInstanceCountPerUltraServer *int           `json:"SpareInstanceCountPerUltraServer"`
		Tags                             []endpoint.Tag `json:"Tags"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.planName(in.TrainingPlanName, "trainingPlanName")
	if ve.Required(in.TrainingPlanOfferingId != nil, "trainingPlanOfferingId") {
		id := *in.TrainingPlanOfferingId
		switch {
		case len(id) < 1 || len(id) > 256:
			ve.Add(id, "trainingPlanOfferingId", "Member must have length between 1 and 256")
		case !patOfferingID.MatchString(id):
			ve.Add(id, "trainingPlanOfferingId", "Member must satisfy regular expression pattern: "+patOfferingIDText)
		}
	}
	ve.tags(in.Tags)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	var tags []capacity.Tag
	for _, t := range in.Tags {
		tags = append(tags, capacity.Tag(t))
	}
	p, err := cal.CreatePlan(*in.TrainingPlanName, *in.TrainingPlanOfferingId, tags)
	if err != nil {
		return nil, err
	}
	return map[string]string{"TrainingPlanArn": a.planArn(p.Name)}, nil
}

func (e *validationError) planName(v *string, path string) {
	if !e.Required(v != nil, path) {
		return
	}
	switch {
	case len(*v) < 1 || len(*v) > 64:
		e.Add(*v, path, "Member must have length between 1 and 64")
	case !patPlanName.MatchString(*v):
		e.Add(*v, path, "Member must satisfy regular expression pattern: "+patPlanNameText)
	}
}

type reservedCapacitySummary struct {
	ReservedCapacityArn string `json:"ReservedCapacityArn"`
	InstanceType        string `json:"InstanceType"`
	TotalInstanceCount  int    `json:"TotalInstanceCount"`
	Status              string `json:"Status"`
	AvailabilityZone    string `json:"AvailabilityZone,omitempty"`
	planSpan
}

// planOutput is DescribeTrainingPlan's output and ListTrainingPlans' summary.
type planOutput struct {
	TrainingPlanArn  string `json:"TrainingPlanArn"`
	TrainingPlanName string `json:"TrainingPlanName"`
	Status           string `json:"Status"`
	StatusMessage    string `json:"StatusMessage,omitempty"`
	planSpan
	UpfrontFee                string                    `json:"UpfrontFee"`
	CurrencyCode              string                    `json:"CurrencyCode"`
	TotalInstanceCount        int                       `json:"TotalInstanceCount"`
	AvailableInstanceCount    int                       `json:"AvailableInstanceCount"`
	InUseInstanceCount        int                       `json:"InUseInstanceCount"`
	UnhealthyInstanceCount    int                       `json:"UnhealthyInstanceCount"`
	TargetResources           []string                  `json:"TargetResources"`
	ReservedCapacitySummaries []reservedCapacitySummary `json:"ReservedCapacitySummaries"`
	// capstan's accounting (not a SageMaker member; SDKs ignore it).
	UsedInstanceHours float64 `json:"CapstanUsedInstanceHours"`
}

func (a *API) planOut(v capacity.PlanView) planOutput {
	o := planOutput{TrainingPlanArn: a.planArn(v.Name), TrainingPlanName: v.Name, Status: v.Status,
		planSpan: spanOf(v.DurationHours, v.Start, v.End), UpfrontFee: v.UpfrontFee,
		CurrencyCode: v.CurrencyCode, TotalInstanceCount: v.Total(), AvailableInstanceCount: v.Available,
		InUseInstanceCount: v.InUse, TargetResources: v.TargetResources, UsedInstanceHours: v.Usage.InstanceHours[v.Key]}
	switch v.Status {
	case capacity.StatusScheduled:
		o.StatusMessage = fmt.Sprintf("The plan starts at %s.", v.Start.UTC().Format(time.RFC3339))
	case capacity.StatusExpired:
		o.StatusMessage = fmt.Sprintf("The plan ended at %s.", v.End.UTC().Format(time.RFC3339))
	}
	for i, r := range v.Capacities {
		o.ReservedCapacitySummaries = append(o.ReservedCapacitySummaries, reservedCapacitySummary{
			ReservedCapacityArn: fmt.Sprintf("arn:aws:sagemaker:%s:%s:reserved-capacity/%s-%d", a.opts.Region, a.opts.AccountID, v.Key, i+1),
			InstanceType:        v.InstanceType, TotalInstanceCount: r.Count, Status: v.Status, AvailabilityZone: r.Zone,
			planSpan: spanOf(v.DurationHours, v.Start, v.End)})
	}
	return o
}

// planEndpoint is an endpoint with a variant on a plan, in DescribeTrainingPlan's
// CapstanEndpoints.
type planEndpoint struct {
	EndpointName   string   `json:"EndpointName"`
	EndpointStatus string   `json:"EndpointStatus"`
	FailureReason  string   `json:"FailureReason,omitempty"`
	VariantNames   []string `json:"VariantNames"`
	// InstanceCount is the variant replicas the endpoint runs on the plan.
	InstanceCount int `json:"InstanceCount"`
}

// describedPlan is DescribeTrainingPlan's output: the plan and, as capstan's
// extension, the endpoints on it — what a client could only find by
// describing every endpoint.
type describedPlan struct {
	planOutput
	Endpoints []planEndpoint `json:"CapstanEndpoints"`
}

// endpointsOn lists the endpoints whose serving or pending deployment has a
// variant on plan key, in name order; an endpoint whose plan has ended still
// lists it (it fails until updated).
func (a *API) endpointsOn(ctx context.Context, key string) ([]planEndpoint, error) {
	eps, err := a.svc.ListEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := []planEndpoint{}
	for _, ep := range eps {
		pe := planEndpoint{EndpointName: ep.Name, EndpointStatus: ep.Status, FailureReason: ep.FailureReason, VariantNames: []string{}}
		for _, d := range []*endpoint.Deployment{ep.Current, ep.Pending} {
			if d == nil {
				continue
			}
			for _, v := range d.Variants {
				if v.Reservation.Key != key {
					continue
				}
				if !slices.Contains(pe.VariantNames, v.Name) {
					pe.VariantNames = append(pe.VariantNames, v.Name)
				}
				pe.InstanceCount += len(v.Replicas)
			}
		}
		if len(pe.VariantNames) > 0 {
			out = append(out, pe)
		}
	}
	return out, nil
}

func (a *API) describeTrainingPlan(ctx context.Context, body []byte) (any, error) {
	cal, err := a.plans()
	if err != nil {
		return nil, err
	}
	var in struct {
		TrainingPlanName *string `json:"TrainingPlanName"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.planName(in.TrainingPlanName, "trainingPlanName")
	if err := ve.Err(); err != nil {
		return nil, err
	}
	v, err := cal.GetPlan(*in.TrainingPlanName)
	if err != nil {
		return nil, err
	}
	eps, err := a.endpointsOn(ctx, v.Key)
	if err != nil {
		return nil, err
	}
	return describedPlan{planOutput: a.planOut(v), Endpoints: eps}, nil
}

type planFilter struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

func (a *API) listTrainingPlans(_ context.Context, body []byte) (any, error) {
	cal, err := a.plans()
	if err != nil {
		return nil, err
	}
	var in struct {
		NextToken       string       `json:"NextToken"`
		MaxResults      *int         `json:"MaxResults"`
		StartTimeAfter  *Epoch       `json:"StartTimeAfter"`
		StartTimeBefore *Epoch       `json:"StartTimeBefore"`
		SortBy          string       `json:"SortBy"`
		SortOrder       string       `json:"SortOrder"`
		Filters         []planFilter `json:"Filters"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.maxLen(in.NextToken, 8192, "nextToken")
	pg := awsjson.Paging{NextToken: in.NextToken, MaxResults: in.MaxResults}
	pg.CheckMaxResults(&ve.Violations, 100)
	ve.enum(in.SortBy, "sortBy", "TrainingPlanName", "StartTime", "Status")
	ve.enum(in.SortOrder, "sortOrder", "Ascending", "Descending")
	if in.Filters != nil {
		ve.listLen(len(in.Filters), 1, 5, "filters")
	}
	for i, f := range in.Filters {
		p := fmt.Sprintf("filters.%d.member", i+1)
		ve.enum(f.Name, p+".name", "Status")
		if ve.Required(f.Name != "", p+".name") {
			ve.enum(f.Value, p+".value", planStatuses...)
		}
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	// A token is refused before the plans are read; Page checks it again
	// against what the filters keep.
	errToken := awsjson.Validationf("Invalid pagination token.")
	if _, ok := awsjson.ParseToken(in.NextToken); !ok {
		return nil, errToken
	}
	views, err := cal.ListPlans()
	if err != nil {
		return nil, err
	}
	var kept []capacity.PlanView
	for _, v := range views {
		if in.StartTimeAfter != nil && !v.Start.After(in.StartTimeAfter.Time) {
			continue
		}
		if in.StartTimeBefore != nil && !v.Start.Before(in.StartTimeBefore.Time) {
			continue
		}
		ok := true
		for _, f := range in.Filters {
			ok = ok && v.Status == f.Value
		}
		if ok {
			kept = append(kept, v)
		}
	}
	// Default order: StartTime, Descending (newest reservations first).
	less := func(i, j int) bool { return kept[i].Start.Before(kept[j].Start) }
	switch in.SortBy {
	case "TrainingPlanName":
		less = func(i, j int) bool { return kept[i].Key < kept[j].Key }
	case "Status":
		less = func(i, j int) bool { return kept[i].Status < kept[j].Status }
	}
	desc := in.SortOrder != "Ascending"
	sort.SliceStable(kept, func(i, j int) bool {
		if desc {
			return less(j, i)
		}
		return less(i, j)
	})
	start, end, next, ok := pg.Page(len(kept), 10)
	if !ok {
		return nil, errToken
	}
	out := struct {
		TrainingPlanSummaries []planOutput `json:"TrainingPlanSummaries"`
		NextToken             string       `json:"NextToken,omitempty"`
	}{TrainingPlanSummaries: []planOutput{}, NextToken: next}
	for _, v := range kept[start:end] {
		out.TrainingPlanSummaries = append(out.TrainingPlanSummaries, a.planOut(v))
	}
	return out, nil
}
