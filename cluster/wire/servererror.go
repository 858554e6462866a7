package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// ServerError is an error as the Pulsar protocol carries it: a ServerError
// code and a message. Clients match on the code's name (pulsar-client-go
// formats "server error: TopicNotFound: ..."), so the code a broker sends
// decides what a client does next: retry, reconnect, or give up.
type ServerError struct {
	Code    pb.ServerError
	Message string
}

func (e *ServerError) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is makes every ServerError match the sentinel of its code, so that
// errors.Is(err, wire.ErrTopicNotFound) holds for any TopicNotFound.
func (e *ServerError) Is(target error) bool {
	t, ok := target.(*ServerError)
	return ok && t.Code == e.Code
}

// Errorf returns a ServerError with the given code and a formatted message.
func Errorf(code pb.ServerError, format string, args ...any) error {
	return &ServerError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// The sentinels, one per code. Wrap them to give a code to an error of another
// layer: fmt.Errorf("%w: topic %s is being loaded", wire.ErrServiceNotReady, t).
var (
	ErrUnknown                            = &ServerError{Code: pb.ServerError_UnknownError}
	ErrMetadata                           = &ServerError{Code: pb.ServerError_MetadataError}
	ErrPersistence                        = &ServerError{Code: pb.ServerError_PersistenceError}
	ErrAuthentication                     = &ServerError{Code: pb.ServerError_AuthenticationError}
	ErrAuthorization                      = &ServerError{Code: pb.ServerError_AuthorizationError}
	ErrConsumerBusy                       = &ServerError{Code: pb.ServerError_ConsumerBusy}
	ErrServiceNotReady                    = &ServerError{Code: pb.ServerError_ServiceNotReady}
	ErrProducerBlockedQuotaExceeded       = &ServerError{Code: pb.ServerError_ProducerBlockedQuotaExceededError}
	ErrProducerBlockedQuotaExceededAtOpen = &ServerError{Code: pb.ServerError_ProducerBlockedQuotaExceededException}
	ErrChecksumMismatch                   = &ServerError{Code: pb.ServerError_ChecksumError}
	ErrUnsupportedVersion                 = &ServerError{Code: pb.ServerError_UnsupportedVersionError}
	ErrTopicNotFound                      = &ServerError{Code: pb.ServerError_TopicNotFound}
	ErrSubscriptionNotFound               = &ServerError{Code: pb.ServerError_SubscriptionNotFound}
	ErrConsumerNotFound                   = &ServerError{Code: pb.ServerError_ConsumerNotFound}
	ErrTooManyRequests                    = &ServerError{Code: pb.ServerError_TooManyRequests}
	ErrTopicTerminated                    = &ServerError{Code: pb.ServerError_TopicTerminatedError}
	ErrProducerBusy                       = &ServerError{Code: pb.ServerError_ProducerBusy}
	ErrInvalidTopicName                   = &ServerError{Code: pb.ServerError_InvalidTopicName}
	ErrIncompatibleSchema                 = &ServerError{Code: pb.ServerError_IncompatibleSchema}
	ErrConsumerAssign                     = &ServerError{Code: pb.ServerError_ConsumerAssignError}
	ErrTransactionCoordinatorNotFound     = &ServerError{Code: pb.ServerError_TransactionCoordinatorNotFound}
	ErrInvalidTxnStatus                   = &ServerError{Code: pb.ServerError_InvalidTxnStatus}
	ErrNotAllowed                         = &ServerError{Code: pb.ServerError_NotAllowedError}
	ErrTransactionConflict                = &ServerError{Code: pb.ServerError_TransactionConflict}
	ErrTransactionNotFound                = &ServerError{Code: pb.ServerError_TransactionNotFound}
	ErrProducerFenced                     = &ServerError{Code: pb.ServerError_ProducerFenced}
)

// serverErrors is the one table from codes to errors. A test checks that it
// covers every value of the ServerError enum.
var serverErrors = map[pb.ServerError]*ServerError{}

func init() {
	for _, e := range []*ServerError{
		ErrUnknown, ErrMetadata, ErrPersistence, ErrAuthentication, ErrAuthorization,
		ErrConsumerBusy, ErrServiceNotReady, ErrProducerBlockedQuotaExceeded,
		ErrProducerBlockedQuotaExceededAtOpen, ErrChecksumMismatch, ErrUnsupportedVersion,
		ErrTopicNotFound, ErrSubscriptionNotFound, ErrConsumerNotFound, ErrTooManyRequests,
		ErrTopicTerminated, ErrProducerBusy, ErrInvalidTopicName, ErrIncompatibleSchema,
		ErrConsumerAssign, ErrTransactionCoordinatorNotFound, ErrInvalidTxnStatus,
		ErrNotAllowed, ErrTransactionConflict, ErrTransactionNotFound, ErrProducerFenced,
	} {
		serverErrors[e.Code] = e
	}
}

// Sentinel returns the sentinel error of a code, or ErrUnknown.
func Sentinel(code pb.ServerError) error {
	if e, ok := serverErrors[code]; ok {
		return e
	}
	return ErrUnknown
}

// ToWire returns the code and message to send for err: the code of the
// ServerError it wraps (UnknownError when it wraps none) and err's text, less
// the code's name in front, which the client prints itself.
func ToWire(err error) (pb.ServerError, string) {
	var se *ServerError
	if !errors.As(err, &se) {
		return pb.ServerError_UnknownError, err.Error()
	}
	if se == err {
		return se.Code, se.Message
	}
	return se.Code, strings.TrimPrefix(err.Error(), se.Code.String()+": ")
}
