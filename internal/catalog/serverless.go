package catalog

// Serverless inference (SageMaker ServerlessConfig).
const (
	// ServerlessPricePerGBSecond is SageMaker Serverless Inference's on-demand
	// compute price in us-east-1: $0.0000200 per second for 1 GB of memory
	// (1024 MB: $0.0000200/s … 6144 MB: $0.0001200/s), billed per millisecond
	// of request processing (aws.amazon.com/sagemaker/pricing, "Serverless
	// Inference", US East (N. Virginia)). Data processing ($0.016 per GB in
	// or out) and provisioned concurrency are not billed by capstan.
	ServerlessPricePerGBSecond = 0.00002

	// ServerlessInstanceType is the catalog instance type whose GPU stands
	// in for serverless compute: serverless replicas run the simulated
	// engine on its GPU (the smallest one-GPU type) without drawing an
	// instance from the fleet.
	ServerlessInstanceType = "ml.g5.xlarge"
)

// ServerlessMemorySizes are the MemorySizeInMB values SageMaker accepts.
var ServerlessMemorySizes = []int{1024, 2048, 3072, 4096, 5120, 6144}

// ServerlessCost is what a serverless request that took ms milliseconds of
// compute costs at memoryMB.
func ServerlessCost(memoryMB int, ms int64) float64 {
	return float64(ms) / 1000 * float64(memoryMB) / 1024 * ServerlessPricePerGBSecond
}
