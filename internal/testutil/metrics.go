package testutil

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// ScrapeMetrics reads url with Prometheus's own text parser: the endpoint
// must serve valid Prometheus text.
func ScrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "metrics must parse as Prometheus text:\n%s", body)
	return families
}

// MetricValue is the value of the gauge or counter series of name with
// exactly labels; -1 when there is none.
func MetricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	fam, ok := families[name]
	if !ok {
		return -1
	}
	for _, m := range fam.GetMetric() {
		if !sameLabels(m.GetLabel(), labels) {
			continue
		}
		if m.Gauge != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	return -1
}

// MetricHistogram is the histogram series of name with exactly labels; nil
// when there is none.
func MetricHistogram(families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Histogram {
	for _, m := range families[name].GetMetric() {
		if sameLabels(m.GetLabel(), labels) {
			return m.GetHistogram()
		}
	}
	return nil
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}
