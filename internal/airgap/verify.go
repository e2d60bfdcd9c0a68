package airgap

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

// VerifyOptions says which signatures Verify accepts.
type VerifyOptions struct {
	TrustedKeys   []PublicKey
	AllowUnsigned bool // accept a file with no signature at all (never one with a bad signature)
}

// Problem is one thing in a file that does not verify.
type Problem struct {
	NodeID string // the log's node; empty for the bundle as a whole
	JobID  string // the entry's job; empty for a log or the bundle
	Index  int    // the entry's index in its log, -1 for a log or the bundle
	What   string
}

func (p Problem) String() string {
	switch {
	case p.Index >= 0:
		return fmt.Sprintf("node %q entry %d (job %s): %s", p.NodeID, p.Index, p.JobID, p.What)
	case p.NodeID != "":
		return fmt.Sprintf("node %q: %s", p.NodeID, p.What)
	}
	return p.What
}

// Report is every problem verification found.
type Report struct {
	Problems []Problem
}

// OK reports whether nothing was wrong.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Err is nil when OK, else an error listing every problem, one per line.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	lines := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		lines[i] = p.String()
	}
	return fmt.Errorf("verification failed, %d problem(s):\n%s", len(r.Problems), strings.Join(lines, "\n"))
}

// BadNodes is the set of nodes whose log has a problem, so an import can
// take only the logs that verify. Bundle-wide problems (signature, manifest
// digest) name no node: whether to import anything then is the caller's
// call.
func (r Report) BadNodes() map[string]bool {
	bad := map[string]bool{}
	for _, p := range r.Problems {
		if p.NodeID != "" || p.Index >= 0 {
			bad[p.NodeID] = true
		}
	}
	return bad
}

// knownKinds are the operation kinds an entry may have.
var knownKinds = contract.Kinds()

// Verify checks everything a bundle claims: its signature and the statement
// it covers, its manifest digest, and every log's hash chain, order and
// head.
func Verify(b Bundle, opts VerifyOptions) Report {
	var r Report
	bundleProblem := func(what string) { r.Problems = append(r.Problems, Problem{Index: -1, What: what}) }
	if b.Format != BundleFormat {
		bundleProblem(fmt.Sprintf("format is %q, want %q", b.Format, BundleFormat))
	}
	for _, what := range checkSignature(signed{
		what:        "bundle",
		envelope:    b.Signature,
		signedBy:    b.SignedBy,
		payloadType: BundlePayloadType,
		header:      b.statement(),
		statement:   &bundleStatement{},
	}, opts) {
		bundleProblem(what)
	}
	sums := payloadSums(b.JobLogs)
	// The manifest digest is one hash over everything, so it runs beside
	// the entry checks, which split across the other cores.
	var digest string
	var wg sync.WaitGroup
	wg.Go(func() { digest = manifestDigest(b.JobLogs, b.Calls, sumsIn(sums)) })
	logProblems := make([][]Problem, len(b.JobLogs))
	for i, log := range b.JobLogs {
		logProblems[i] = checkLog(log, sums[i])
	}
	wg.Wait()
	if digest != b.ManifestDigest {
		bundleProblem(fmt.Sprintf("manifest digest does not match: stored %s, computed %s", b.ManifestDigest, digest))
	}
	seen := map[string]bool{}
	for i, log := range b.JobLogs {
		if seen[log.NodeID] {
			r.Problems = append(r.Problems, Problem{NodeID: log.NodeID, Index: -1, What: "node has more than one log in the bundle"})
		}
		seen[log.NodeID] = true
		r.Problems = append(r.Problems, logProblems[i]...)
	}
	return r
}

// chainPoint is where a log's chain stands before an entry: the link the
// next entry must name as prevLink, and the HLC it must come after.
type chainPoint struct {
	link   *string // nil before a node's first entry
	hlc    hlc.Timestamp
	hasHLC bool
	origin string // where link comes from, for messages: "the checkpoint", "the previous entry"
	// linkSum is link decoded, when known (hasSum): the previous entry's
	// link as computed, once it matched the one stored. The next entry's
	// link is computed from it without decoding its prevLink again.
	linkSum [sha256.Size]byte
	hasSum  bool
}

// checkLog checks log's entries and head; payloadSums are the SHA-256 of
// its entries' payloads.
func checkLog(log JobLog, payloadSums [][sha256.Size]byte) []Problem {
	var problems []Problem
	logProblem := func(what string) { problems = append(problems, Problem{NodeID: log.NodeID, Index: -1, What: what}) }
	var point chainPoint
	if log.Checkpoint != nil {
		point = chainPoint{link: &log.Checkpoint.Link, origin: "the checkpoint"}
		ts, err := parseHLC(log.Checkpoint.HLC)
		if err != nil {
			logProblem("checkpoint hlc: " + err.Error())
		}
		point.hlc, point.hasHLC = ts, err == nil
	}
	problems = append(problems, checkEntries(log, payloadSums, point)...)
	head, headHLC := "", ""
	switch {
	case len(log.Entries) > 0:
		last := log.Entries[len(log.Entries)-1]
		head, headHLC = last.Link, last.THLC
	case log.Checkpoint != nil:
		head, headHLC = log.Checkpoint.Link, log.Checkpoint.HLC
	}
	if log.ChainHead != head {
		logProblem(fmt.Sprintf("chainHead does not match the last link: stored %q, last link %q", log.ChainHead, head))
	}
	if log.LastHLC != headHLC {
		logProblem(fmt.Sprintf("lastHlc does not match the last entry's tHlc: stored %q, last %q", log.LastHLC, headHLC))
	}
	return problems
}

// checkEntries checks every entry of log, the first against start, in
// chunks on every core: an entry needs only the one before it, which each
// chunk reads from the log itself.
func checkEntries(log JobLog, payloadSums [][sha256.Size]byte, start chainPoint) []Problem {
	chunkProblems := make([][]Problem, chunksOf(len(log.Entries), chunkSize))
	inChunks(len(log.Entries), chunkSize, func(lo, hi int) {
		point := start
		if lo > 0 {
			point = pointAfter(&log.Entries[lo-1])
		}
		var problems []Problem
		for i := lo; i < hi; i++ {
			e := &log.Entries[i]
			var whats []string
			whats, point = checkEntry(log.NodeID, e, &payloadSums[i], point)
			for _, what := range whats {
				problems = append(problems, Problem{NodeID: log.NodeID, JobID: e.JobID, Index: i, What: what})
			}
		}
		chunkProblems[lo/chunkSize] = problems
	})
	return slices.Concat(chunkProblems...)
}

// pointAfter is the chain point after e.
func pointAfter(e *Entry) chainPoint {
	ts, err := parseHLC(e.THLC)
	return chainPoint{link: &e.Link, hlc: ts, hasHLC: err == nil, origin: "the previous entry"}
}

// checkEntry checks one entry of node's log, whose payload has SHA-256
// payloadSum, against itself and against the chain point before it, and
// returns its problems and the chain point after it. Each relation is
// checked on its own (payload against payloadHash, the stored fields
// against link, prevLink against the link before), so a report names
// exactly what was changed.
func checkEntry(node string, e *Entry, payloadSum *[sha256.Size]byte, before chainPoint) (problems []string, after chainPoint) {
	if e.NodeID != node {
		problems = append(problems, fmt.Sprintf("nodeId %q does not match the log's node", e.NodeID))
	}
	if e.NodeID == "" {
		problems = append(problems, "nodeId is empty")
	}
	if e.JobID == "" {
		problems = append(problems, "jobId is empty")
	}
	if !slices.Contains(knownKinds, e.Kind) {
		problems = append(problems, fmt.Sprintf("unknown kind %q", e.Kind))
	}
	payloadHashMatches := true
	if computed := encodeSum(*payloadSum); string(computed[:]) != e.PayloadHash {
		payloadHashMatches = false
		problems = append(problems, fmt.Sprintf("payload hash does not match: stored %s, computed %s", e.PayloadHash, string(computed[:])))
	}
	if what := checkPrevLink(e.PrevLink, before); what != "" {
		problems = append(problems, what)
	}
	after = chainPoint{link: &e.Link, origin: "the previous entry"}
	ts, err := parseHLC(e.THLC)
	if err != nil {
		return append(problems, "tHlc: "+err.Error()), after
	}
	after.hlc, after.hasHLC = ts, true
	if before.hasHLC && !before.hlc.Before(ts) {
		problems = append(problems, fmt.Sprintf("tHlc %s is not after %s's %s (entries out of order)", e.THLC, before.origin, before.hlc))
	}
	// A stored hash equal to the one computed decodes to it; a stored
	// prevLink equal to the link before decodes to that link's sum.
	var known linkInputs
	if payloadHashMatches {
		known.payloadHash = payloadSum
	}
	if before.hasSum && e.PrevLink != nil && *e.PrevLink == *before.link {
		known.prevLink = &before.linkSum
	}
	sum, what := checkLink(e, known)
	if what != "" {
		return append(problems, what), after
	}
	after.linkSum, after.hasSum = sum, true
	return problems, after
}

// encodeSum is sum in standard base64, as the file stores hashes and
// links, without allocating: it is compared twice for every entry.
func encodeSum(sum [sha256.Size]byte) (b64 [44]byte) {
	base64.StdEncoding.Encode(b64[:], sum[:])
	return b64
}

// checkPrevLink checks that an entry names the link before it.
func checkPrevLink(prev *string, before chainPoint) string {
	switch {
	case before.link == nil && prev != nil:
		return fmt.Sprintf("prevLink is %s, want null: with no checkpoint the first entry is the node's first", *prev)
	case before.link != nil && (prev == nil || *prev != *before.link):
		return fmt.Sprintf("prevLink does not match %s's link: stored %s, %s's %s",
			before.origin, showLink(prev), before.origin, *before.link)
	}
	return ""
}

// linkInputs are the decoded prevLink and payloadHash of an entry, where
// the verifier knows them already; the others are decoded from the entry.
type linkInputs struct {
	prevLink, payloadHash *[sha256.Size]byte
}

// checkLink recomputes e's link from its stored prevLink, jobId, tHlc
// (which parsed as canonical) and payloadHash, and returns it when it
// matches the one stored, or what is wrong.
func checkLink(e *Entry, known linkInputs) (sum [sha256.Size]byte, problem string) {
	var prevBuf, payloadHashBuf hashBuf
	var prev, payloadHash []byte
	var err error
	switch {
	case known.prevLink != nil:
		prev = known.prevLink[:]
	case e.PrevLink != nil:
		if prev, err = prevBuf.decode(*e.PrevLink); err != nil {
			return sum, fmt.Sprintf("prevLink is not base64: %v", err)
		}
	}
	if known.payloadHash != nil {
		payloadHash = known.payloadHash[:]
	} else if payloadHash, err = payloadHashBuf.decode(e.PayloadHash); err != nil {
		return sum, fmt.Sprintf("payloadHash is not base64: %v", err)
	}
	sum = hlc.LinkOfText(prev, e.JobID, e.THLC, payloadHash)
	if computed := encodeSum(sum); string(computed[:]) != e.Link {
		return sum, fmt.Sprintf("link does not match: stored %s, computed %s", e.Link, string(computed[:]))
	}
	return sum, ""
}

// hashBuf holds a decoded hash without allocating. It has room for a
// SHA-256 in padded base64 (44 characters, 33 bytes before padding is
// dropped) and a little more; anything longer is refused, not decoded.
type hashBuf [48]byte

func (b *hashBuf) decode(b64 string) ([]byte, error) {
	if base64.StdEncoding.DecodedLen(len(b64)) > len(b) {
		return nil, fmt.Errorf("%d characters, longer than a SHA-256 in base64", len(b64))
	}
	n, err := base64.StdEncoding.Decode(b[:], []byte(b64))
	return b[:n], err
}

// parseHLC parses an HLC as String writes it, refusing other spellings of
// the same reading: the link hashes the text, so it must be canonical.
func parseHLC(s string) (hlc.Timestamp, error) {
	if physical, logical, ok := readCanonicalHLC(s); ok && logical <= math.MaxUint32 {
		return hlc.Timestamp{Physical: physical, Logical: uint32(logical)}, nil
	}
	ts, err := hlc.Parse(s)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	return hlc.Timestamp{}, fmt.Errorf("hlc timestamp %q is not written canonically, want %q", s, ts.String())
}

// readCanonicalHLC reads s when it has the shape hlc.Timestamp.String
// writes, 15 digits, "-", 10 digits, in one pass over its digits: the
// common case, read without hlc.Parse and a second look at the shape
// (every entry's timestamp is read, a sizeable share of verification).
func readCanonicalHLC(s string) (physical int64, logical uint64, ok bool) {
	if len(s) != 26 || s[15] != '-' {
		return 0, 0, false
	}
	for i := range 15 {
		digit := s[i] - '0' // wraps past 9 for any byte below '0'
		if digit > 9 {
			return 0, 0, false
		}
		physical = physical*10 + int64(digit)
	}
	for i := 16; i < 26; i++ {
		digit := s[i] - '0'
		if digit > 9 {
			return 0, 0, false
		}
		logical = logical*10 + uint64(digit)
	}
	return physical, logical, true
}

func showLink(link *string) string {
	if link == nil {
		return "null"
	}
	return *link
}

// chunkSize is how many entries one goroutine checks at a time: large
// enough that starting it costs nothing beside the hashing.
const chunkSize = 4096

func chunksOf(n, size int) int { return (n + size - 1) / size }

// inChunks calls do for every chunk [lo, hi) of [0, n), size items each,
// on as many goroutines as there are cores, and returns when all are done.
func inChunks(n, size int, do func(lo, hi int)) {
	if n <= size { // one chunk: handing it to another goroutine only waits for it
		do(0, n)
		return
	}
	next := make(chan int, chunksOf(n, size))
	for lo := 0; lo < n; lo += size {
		next <- lo
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), chunksOf(n, size)) {
		wg.Go(func() {
			for lo := range next {
				do(lo, min(lo+size, n))
			}
		})
	}
	wg.Wait()
}

// maxAhead bounds the chunks inOrder holds at once: each is about a
// megabyte.
const maxAhead = 8

// inOrder encodes the chunks [lo, hi) of [0, n), size items each, on every
// core at once, at most two a core (and maxAhead) ahead of the writing, and
// hands each to write in order. encode appends to buf, an empty buffer that is reused
// once written. After the first error, of encode or write, nothing more is
// written; inOrder returns that error once every chunk begun is done.
func inOrder(n, size int, encode func(buf []byte, lo, hi int) ([]byte, error), write func([]byte) error) error {
	type encoded struct {
		buf []byte
		err error
	}
	if n <= size { // one chunk: handing it to another goroutine only waits for it
		buf, err := encode(nil, 0, n)
		if err != nil {
			return err
		}
		return write(buf)
	}
	chunks := chunksOf(n, size)
	done := make([]chan encoded, chunks)
	for i := range done {
		done[i] = make(chan encoded, 1)
	}
	ahead := make(chan struct{}, min(2*runtime.GOMAXPROCS(0), maxAhead))
	spare := make(chan []byte, cap(ahead))
	go func() {
		for i := range chunks {
			ahead <- struct{}{}
			var buf []byte
			select {
			case buf = <-spare:
			default:
			}
			go func() {
				lo := i * size
				b, err := encode(buf, lo, min(lo+size, n))
				done[i] <- encoded{b, err}
			}()
		}
	}()
	var firstErr error
	for i := range chunks {
		chunk := <-done[i]
		if firstErr == nil {
			firstErr = chunk.err
		}
		if firstErr == nil {
			firstErr = write(chunk.buf)
		}
		spare <- chunk.buf[:0]
		<-ahead
	}
	return firstErr
}
