// Package contract holds the names and types every part of Outpost shares:
// task queues, workflow ids and their parsers, signal, query and
// search-attribute names, statuses and kinds, the submissions a site hands
// off, the states the workflows answer, operator actions, and the inputs
// and results of activities. It does no I/O and imports nothing of the rest
// of Outpost, so the site SDK, the stores, the CLI and the workflows can
// all depend on it (the way River keeps rivertype).
package contract

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Task queues.
const (
	// CentralTaskQueue is served by `outpost central`.
	CentralTaskQueue = "outpost-central"
	// siteTaskQueuePrefix + siteID is served by that site's daemon.
	siteTaskQueuePrefix = "outpost-site-"
)

// SiteTaskQueue returns the task queue served by the daemon of siteID.
func SiteTaskQueue(siteID string) string { return siteTaskQueuePrefix + siteID }

// Workflow type names: the central worker registers each workflow under
// its name, and the site and the tools start or look them up by name, so
// the site SDK links no workflow code.
const (
	// WorkflowNotificationStarted is a notification whose site started its
	// workflow with the submission as the input: one billed action (the
	// signal) less than WorkflowNotification. A site uses it only while
	// every central worker knows it (GenerationStartsNotifications); a
	// worker from before does not know the type, so its workflow task
	// fails (visible in the Web UI) until a current worker takes it,
	// instead of waiting for a submit that never comes.
	WorkflowNotificationStarted = "NotificationWorkflowV2"
	// WorkflowNotification is a notification handed off by SignalWithStart
	// with signal SignalSubmit: how sites hand off while a central worker
	// of an earlier generation polls, and how sites of earlier versions
	// and air-gap imports always do.
	WorkflowNotification = "NotificationWorkflow"
	// WorkflowCachedCallStarted is a cached call whose site started its
	// workflow with the submission as the input: one billed action (the
	// signal) less than WorkflowCachedCall. A site uses it only while
	// every central worker knows it (GenerationStartsCalls), as with
	// WorkflowNotificationStarted.
	WorkflowCachedCallStarted = "CachedCallWorkflowV2"
	// WorkflowCachedCall is a cached call handed off by SignalWithStart
	// with signal SignalSubmit: how sites hand off while a central worker
	// of an earlier generation polls, and how sites of earlier versions
	// and air-gap imports always do.
	WorkflowCachedCall = "CachedCallWorkflow"
	// WorkflowTelemetryIngest is one of TelemetryIngestShards long-running
	// workflows that take sites' telemetry batches by signal
	// (SignalTelemetryBatch), write what arrived together in one
	// central-store write and answer QueryTelemetryWritten. A site uses it
	// while every central worker knows it (GenerationTelemetryIngest).
	WorkflowTelemetryIngest = "TelemetryIngestWorkflow"
	// WorkflowIngestTelemetry ingests one telemetry batch, the site waiting
	// for its result: how sites send while a central worker of an earlier
	// generation polls, and how sites of earlier versions always do.
	WorkflowIngestTelemetry    = "IngestTelemetryWorkflow"
	WorkflowReconcileSite      = "ReconcileSiteWorkflow"
	WorkflowPurge              = "PurgeWorkflow"
	WorkflowLookupNotification = "LookupNotificationWorkflow"
)

// CentralBuildIDPrefix starts the build id of every central worker; the
// generation of its workflow code follows ("outpost-workflows-3"). Temporal
// records it on each workflow task, and lists it for each poller of a task
// queue, so workflows and sites can tell what the workers know.
const CentralBuildIDPrefix = "outpost-workflows-"

// GenerationStartsNotifications is the first generation of central workers
// that run WorkflowNotificationStarted.
const GenerationStartsNotifications = 3

// GenerationStartsCalls is the first generation of central workers that
// run WorkflowCachedCallStarted.
const GenerationStartsCalls = 4

// GenerationTelemetryIngest is the first generation of central workers
// that run WorkflowTelemetryIngest.
const GenerationTelemetryIngest = 5

// GenerationCompressedTelemetry is the first generation of central
// workers that take telemetry batches compressed (the encoding
// "json/gzip").
const GenerationCompressedTelemetry = 6

// CentralGeneration is the generation named by a central worker's build id;
// 0 for a build id Outpost did not set (a worker before generation 2
// recorded the SDK's default, a checksum of its binary).
func CentralGeneration(buildID string) int {
	rest, ours := strings.CutPrefix(buildID, CentralBuildIDPrefix)
	n, err := strconv.Atoi(rest)
	if !ours || err != nil {
		return 0
	}
	return n
}

// Workflow-id prefixes.
const (
	notificationIDPrefix = "notification/"
	callIDPrefix         = "call/"
	telemetryIDPrefix    = "telemetry/"
	reconcileIDPrefix    = "reconcile/"
)

// NotificationWorkflowID is the workflow id of notification id.
func NotificationWorkflowID(id string) string { return notificationIDPrefix + id }

// NotificationIDFromWorkflowID reverses NotificationWorkflowID; ok is false
// for a workflow id of another kind.
func NotificationIDFromWorkflowID(workflowID string) (id string, ok bool) {
	return strings.CutPrefix(workflowID, notificationIDPrefix)
}

// IsOperationID reports whether id is a notification or tracked-operation
// id as Outpost writes them: a UUID in its canonical form, lower case with
// dashes. Other spellings the uuid package also reads ("{…}", "urn:uuid:…",
// no dashes, upper case) name no operation: accepting them would make one
// operation answer to several ids.
func IsOperationID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := range len(id) {
		switch ch := id[i]; i {
		case 8, 13, 18, 23:
			if ch != '-' {
				return false
			}
		default:
			if !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
				return false
			}
		}
	}
	return true
}

// CachedCallWorkflowID is the workflow id of tracked operation id.
func CachedCallWorkflowID(id string) string { return callIDPrefix + id }

// CachedCallIDFromWorkflowID reverses CachedCallWorkflowID; ok is false for
// a workflow id of another kind.
func CachedCallIDFromWorkflowID(workflowID string) (id string, ok bool) {
	return strings.CutPrefix(workflowID, callIDPrefix)
}

// TelemetryWorkflowID names the ingest of one telemetry batch of siteID
// covering tracking changes up to seq.
func TelemetryWorkflowID(siteID string, seq int64) string {
	return telemetryIDPrefix + siteID + "/" + strconv.FormatInt(seq, 10)
}

// TelemetryIngestShards is how many WorkflowTelemetryIngest workflows
// share the sites' telemetry: enough that central's workers write several
// at once and that a run's history, which holds at most one unwritten
// batch per site of its shard, stays small, few enough that each write
// takes many sites' batches together.
const TelemetryIngestShards = 16

// TelemetryIngestWorkflowID is the ingest workflow siteID sends its
// telemetry batches to: always the same one for a site.
func TelemetryIngestWorkflowID(siteID string) string {
	return telemetryIDPrefix + "ingest-" + ingestShard(siteID)
}

// ingestShard is the shard of the ingest workflows siteID's batches go to.
func ingestShard(siteID string) string {
	h := fnv.New32a()
	h.Write([]byte(siteID))
	return strconv.Itoa(int(h.Sum32() % TelemetryIngestShards))
}

// ReconcileScheduleID is the id of the Temporal Schedule that reconciles siteID.
func ReconcileScheduleID(siteID string) string { return reconcileIDPrefix + siteID }

// MaxSummaryBytes bounds a workflow's static summary (its Web UI title):
// the server refuses a start whose summary payload, its JSON string plus
// encoding metadata, exceeds its limit (400 bytes by default).
const MaxSummaryBytes = 200

// Summary is s as a workflow's static summary: cut, with an ellipsis, to at
// most MaxSummaryBytes once JSON-encoded (what the server measures; quotes,
// control and HTML characters take more than one byte), on a UTF-8 boundary.
func Summary(s string) string {
	const ellipsis = "…"
	// cut is where s ends if it must: the longest prefix that leaves room for the ellipsis.
	size, cut := 0, 0
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		size += jsonLen(s[i : i+n])
		if size > MaxSummaryBytes {
			return s[:cut] + ellipsis
		}
		i += n
		if size+len(ellipsis) <= MaxSummaryBytes {
			cut = i
		}
	}
	return s
}

// jsonLen is the length of s encoded as a JSON string, without its quotes.
func jsonLen(s string) int {
	b, _ := json.Marshal(s) // a string always encodes
	return len(b) - 2
}

// Signal and query names.
const (
	// SignalSubmit carries the operation from the site (SignalWithStart),
	// except a notification started with its submission as its input
	// (WorkflowNotificationStarted).
	SignalSubmit = "submit"
	// SignalRetry sends a parked operation back to delivery; payload OperatorAction.
	SignalRetry = "retry"
	// SignalDiscard ends a parked operation as Discarded; payload OperatorAction.
	SignalDiscard = "discard"
	// SignalTelemetryBatch carries one TelemetryBatch to a
	// WorkflowTelemetryIngest.
	SignalTelemetryBatch = "telemetry-batch"
	// QueryTelemetryWritten asks a WorkflowTelemetryIngest run for the last
	// change number of a site (the argument) it wrote.
	QueryTelemetryWritten = "telemetry-written"
	// QueryStatus answers the operation's current OperationStatus.
	QueryStatus = "status"
)

// Status is the lifecycle state of an operation.
type Status string

// Statuses shared by every category.
const (
	// StatusForwarding: still in the site buffer, not yet acknowledged by central.
	StatusForwarding Status = "Forwarding"
	StatusPending    Status = "Pending"
	StatusRetrying   Status = "Retrying"
	StatusDelivered  Status = "Delivered"
	StatusParked     Status = "Parked"
	StatusDiscarded  Status = "Discarded"
	// StatusFailed: a cached call's permanent failure on its immediate attempt.
	StatusFailed Status = "Failed"
	// StatusExported is a site-only answer, never a central row's: the
	// operation left the site on an air-gap bundle and no receipt or
	// online hand-off has settled it yet.
	StatusExported Status = "Exported"
)

// Statuses lists every status, in lifecycle order, the site-only Exported
// included. Each call returns a new slice.
func Statuses() []Status {
	return []Status{StatusForwarding, StatusExported, StatusPending, StatusRetrying, StatusParked, StatusDelivered, StatusDiscarded, StatusFailed}
}

// CentralStatuses lists the statuses central answers and filters by: all
// but Exported, which only a site answers. Each call returns a new slice.
func CentralStatuses() []Status {
	return slices.DeleteFunc(Statuses(), func(s Status) bool { return s == StatusExported })
}

// Terminal reports whether no further delivery will happen without an
// operator. Parked is not terminal: it waits for retry or discard.
func (s Status) Terminal() bool {
	return s == StatusDelivered || s == StatusDiscarded || s == StatusFailed
}

// Kinds, the value of OutpostKind and the site buffer's category.
const (
	KindNotification  = "Notification"
	KindExternalCall  = "ExternalCall"
	KindDatabaseWrite = "DatabaseWrite"
)

// Kinds lists every kind, in the order reports show them. Each call
// returns a new slice, so no caller can change another's.
func Kinds() []string { return []string{KindNotification, KindExternalCall, KindDatabaseWrite} }

// CallKinds lists the kinds of the site's cached operations (a site_calls
// row's kind), as Kinds does.
func CallKinds() []string { return []string{KindExternalCall, KindDatabaseWrite} }

// OperatorAction is the payload of SignalRetry and SignalDiscard. Both fields
// are optional so the Web UI's Send Signal works with {}.
type OperatorAction struct {
	Operator string `json:"operator,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// idempotencyNamespace is the UUID namespace of ids derived from
// idempotency keys (a random constant: changing it would give a key
// another id).
var idempotencyNamespace = [16]byte{0x6f, 0x0b, 0x3a, 0x52, 0x9d, 0x3e, 0x4c, 0x8a, 0xb1, 0xf4, 0x2a, 0x7d, 0x5e, 0x9c, 0x0b, 0x61}

// IdempotentOperationID is the id of the operation a caller named with
// key: the same site, kind and key always give the same id, so a script
// that retries a request makes no second operation, and the same operation
// exported twice is recognisably one.
func IdempotentOperationID(siteID, kind, key string) string {
	return nameBasedUUID(idempotencyNamespace, siteID+"\x00"+kind+"\x00"+key)
}

// nameBasedUUID is the version 5 (SHA-1) UUID of name in namespace, per
// RFC 9562 section 5.5, in its canonical form. It is written here rather
// than taken from a UUID package so that the contract links only the
// standard library; TestIdempotentOperationIDIsUUID5 checks it against
// github.com/google/uuid.
func nameBasedUUID(namespace [16]byte, name string) string {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // the RFC's variant
	s := hex.EncodeToString(u[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}
