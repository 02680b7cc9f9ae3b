package asyncinference

import (
	"errors"

	"github.com/aws/smithy-go"
)

// isS3NotFound says whether err means the object cannot be had at all (a
// failure of the request, not a reason to try again).
func isS3NotFound(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "NoSuchKey", "NoSuchBucket", "NotFound", "AccessDenied", "Forbidden", "InvalidBucketName":
		return true
	}
	return false
}

func s3Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return err.Error()
}
