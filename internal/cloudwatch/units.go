package cloudwatch

// Namespaces capstan records.
const (
	// NamespaceSageMaker holds the endpoint invocation metrics.
	NamespaceSageMaker = "AWS/SageMaker"
	// NamespaceEndpoints holds the instance metrics of endpoints.
	NamespaceEndpoints = "/aws/sagemaker/Endpoints"
)

// units is the CloudWatch unit of each metric capstan serves, as SageMaker
// documents it; a metric not listed has unit None.
var units = map[string]map[string]string{
	NamespaceSageMaker: {
		"Invocations":                "None",
		"InvocationsPerInstance":     "None",
		"Invocation4XXErrors":        "None",
		"Invocation5XXErrors":        "None",
		"InvocationModelErrors":      "None",
		"ConcurrentRequestsPerModel": "None",
		"ModelLatency":               "Microseconds",
		"OverheadLatency":            "Microseconds",
		"ModelSetupTime":             "Microseconds",
	},
	NamespaceEndpoints: {
		"CPUUtilization":       "Percent",
		"MemoryUtilization":    "Percent",
		"DiskUtilization":      "Percent",
		"GPUUtilization":       "Percent",
		"GPUMemoryUtilization": "Percent",
	},
}

// UnitOf is the unit of a metric.
func UnitOf(namespace, metric string) string {
	if u, ok := units[namespace][metric]; ok {
		return u
	}
	return "None"
}

// standardUnits is CloudWatch's StandardUnit enum.
var standardUnits = []string{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
	"Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
	"Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second",
	"Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None"}
