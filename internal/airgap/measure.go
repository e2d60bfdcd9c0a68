package airgap

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"runtime"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

// Measurement is how long an export or an import took beside SHA-256
// alone over the same bundle file: the floor any reading or writing of
// that file stands on. The bench harness reports their ratio. Each is the
// best of measureRounds rounds, the two timed alternately: one run of a
// fifth of a second on a shared machine says more about the neighbours
// than about the code.
type Measurement struct {
	Took, HashOnly time.Duration
	FileBytes      int
}

const measureRounds = 5

// best times op measureRounds times, each after a GC (as a fresh import or
// export process starts), each followed by SHA-256 of the file op returns,
// and keeps the fastest of each.
func best(op func() ([]byte, error)) (Measurement, error) {
	var m Measurement
	for round := range measureRounds {
		runtime.GC()
		start := time.Now()
		file, err := op()
		if err != nil {
			return Measurement{}, err
		}
		took, hash := time.Since(start), timeHash(file)
		if round == 0 || took < m.Took {
			m.Took = took
		}
		if round == 0 || hash < m.HashOnly {
			m.HashOnly = hash
		}
		m.FileBytes = len(file)
	}
	return m, nil
}

// MeasureVerify times reading and verifying a signed bundle of n entries
// (DecodeBundle then Verify, from its file's bytes in memory, as an import
// does) beside SHA-256 of those bytes.
func MeasureVerify(n int) (Measurement, error) {
	key, err := ephemeralKey()
	if err != nil {
		return Measurement{}, err
	}
	file, err := signedBundleFile(n, key)
	if err != nil {
		return Measurement{}, err
	}
	opts := VerifyOptions{TrustedKeys: []PublicKey{key.Public()}}
	return best(func() ([]byte, error) {
		decoded, err := DecodeBundle(bytes.NewReader(file.Bytes()))
		if err != nil {
			return nil, err
		}
		if err := Verify(decoded, opts).Err(); err != nil {
			return nil, fmt.Errorf("measure verify: the synthetic bundle does not verify: %w", err)
		}
		return file.Bytes(), nil
	})
}

// signedBundleFile is the file of a signed bundle of n synthetic entries.
func signedBundleFile(n int, key PrivateKey) (*bytes.Buffer, error) {
	b := NewBundle("bench-site", "bench-node-1", time.Now(), syntheticLogs(n, time.Now()))
	if err := b.Sign(key); err != nil {
		return nil, err
	}
	var file bytes.Buffer
	return &file, Encode(&file, b)
}

// MeasureExport times writing a signed bundle of n prebuilt entries
// (NewBundle, Sign, Encode into memory) beside SHA-256 of the file written.
// The buffer it writes into is sized beforehand, from an untimed encoding:
// what is timed is the export, not the growth of the bench's buffer (an
// export writes to a file).
func MeasureExport(n int) (Measurement, error) {
	key, err := ephemeralKey()
	if err != nil {
		return Measurement{}, err
	}
	logs := syntheticLogs(n, time.Now())
	size, err := encodedSize(NewBundle("bench-site", "bench-node-1", time.Now(), logs), key)
	if err != nil {
		return Measurement{}, err
	}
	var file bytes.Buffer
	file.Grow(size + 4096) // room for each new bundle's own id and times
	return best(func() ([]byte, error) {
		file.Reset()
		b := NewBundle("bench-site", "bench-node-1", time.Now(), logs)
		if err := b.Sign(key); err != nil {
			return nil, err
		}
		if err := Encode(&file, b); err != nil {
			return nil, err
		}
		return file.Bytes(), nil
	})
}

// encodedSize is the size of b's file once signed with key.
func encodedSize(b Bundle, key PrivateKey) (int, error) {
	if err := b.Sign(key); err != nil {
		return 0, err
	}
	var count countingWriter
	err := Encode(&count, b)
	return int(count), err
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

func ephemeralKey() (PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return PrivateKey{}, fmt.Errorf("generate key: %w", err)
	}
	return newPrivateKey(priv), nil
}

// timeHash is how long SHA-256 of file takes.
func timeHash(file []byte) time.Duration {
	start := time.Now()
	sha256.Sum256(file)
	return time.Since(start)
}

// syntheticLogs is n notification entries in two nodes' logs, chained as a
// site's job log chains them, the second node's log starting at a
// checkpoint as after pruning.
func syntheticLogs(n int, start time.Time) []JobLog {
	pruned := &Checkpoint{
		Link: base64.StdEncoding.EncodeToString(hlc.PayloadHash([]byte("pruned"))),
		HLC:  hlc.Timestamp{Physical: start.UnixMilli() - 1}.String(),
	}
	logs := []JobLog{
		{NodeID: "bench-node-1"},
		{NodeID: "bench-node-2", Checkpoint: pruned, ChainHead: pruned.Link, LastHLC: pruned.HLC},
	}
	packers := make([]Packer, len(logs)) // one per log, as an export builds each log's entries
	for i := range n {
		log, packer := &logs[i%2], &packers[i%2]
		ts := hlc.Timestamp{Physical: start.UnixMilli() + int64(i/20), Logical: uint32(i % 20)}
		payload := fmt.Sprintf(`{"to":["ops-team-%d@example.org"],"subject":"Pump %d pressure above threshold",`+
			`"body":"Sensor reading 4.72 bar at %s exceeded the alarm threshold of 4.50 bar; check valve V-%d and confirm.",`+
			`"channel":"email","priority":"high","site":"site-0042","seq":%d}`,
			i%50, i%50, start.UTC().Format(time.RFC3339), i%50, i)
		appendEntry(log, packer, fmt.Sprintf("job-%08d", i), contract.KindNotification, payload, ts, start)
	}
	return logs
}

// appendEntry chains a new entry onto log, its strings laid out by packer
// as an export lays out the entries it reads from the site's job log.
func appendEntry(log *JobLog, packer *Packer, jobID, kind, payload string, ts hlc.Timestamp, enqueuedAt time.Time) {
	var prevBytes []byte
	if log.ChainHead != "" {
		prevBytes, _ = base64.StdEncoding.DecodeString(log.ChainHead) // written by this package: valid
	}
	payloadHash := hlc.PayloadHash([]byte(payload))
	link := hlc.Link(prevBytes, jobID, ts, payloadHash)
	e := Entry{
		NodeID: log.NodeID, THLC: packer.HLC(ts), JobID: packer.String(jobID), Kind: kind,
		Payload: packer.String(payload), PayloadHash: packer.Base64(payloadHash), EnqueuedAt: enqueuedAt,
	}
	if prevBytes != nil {
		prev := packer.Base64(prevBytes)
		e.PrevLink = &prev
	}
	e.Link = packer.Base64(link)
	log.Entries = append(log.Entries, e)
	log.ChainHead, log.LastHLC = e.Link, e.THLC
}
