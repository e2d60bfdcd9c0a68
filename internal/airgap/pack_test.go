package airgap

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/outpost-dev/outpost/internal/hlc"
)

// Every string a Packer gives keeps its bytes while later ones fill its
// block and the blocks after it, a string larger than a block included.
func TestPackerKeepsEveryString(t *testing.T) {
	var p Packer
	type packed struct{ got, want string }
	var all []packed
	for i := range 20_000 {
		raw := bytes.Repeat([]byte{byte('a' + i%26)}, i%300)
		ts := hlc.Timestamp{Physical: int64(i) * 7, Logical: uint32(i % 13)}
		all = append(all,
			packed{p.Bytes(raw), string(raw)},
			packed{p.String(fmt.Sprintf("job-%d", i)), fmt.Sprintf("job-%d", i)},
			packed{p.Base64(raw), base64.StdEncoding.EncodeToString(raw)},
			packed{p.HLC(ts), ts.String()})
	}
	huge := bytes.Repeat([]byte("x"), packBlock+1)
	all = append(all, packed{p.Bytes(huge), string(huge)}, packed{p.String("after the huge one"), "after the huge one"})
	for i, s := range all {
		if s.got != s.want {
			t.Fatalf("string %d: got %.40q, want %.40q", i, s.got, s.want)
		}
	}
}
