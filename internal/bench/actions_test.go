package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
)

// The upsert workflow.GetVersion makes is free (Temporal Cloud exempts
// TemporalChangeVersion); any upsert of Outpost's attributes counts.
func TestOnlyChangeVersionUpsertsAreFree(t *testing.T) {
	t.Parallel()
	attrs := func(names ...string) *commonpb.SearchAttributes {
		fields := map[string]*commonpb.Payload{}
		for _, n := range names {
			fields[n] = &commonpb.Payload{Data: []byte(`"x"`)}
		}
		return &commonpb.SearchAttributes{IndexedFields: fields}
	}
	require.True(t, onlyChangeVersion(attrs(changeVersionAttr)))
	require.False(t, onlyChangeVersion(attrs("OutpostStatus")))
	require.False(t, onlyChangeVersion(attrs(changeVersionAttr, "OutpostStatus")))
	require.False(t, onlyChangeVersion(nil))
}
