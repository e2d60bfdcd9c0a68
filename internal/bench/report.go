package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run's figures, each beside its baseline.
type Report struct {
	// At is when the run started (UTC).
	At      time.Time `json:"at"`
	Machine Machine   `json:"machine"`
	// Dir is the run's temporary directory (removed unless kept).
	Dir     string  `json:"dir"`
	Options Options `json:"options"`
	Rows    []Row   `json:"rows"`
	// Took is how long the whole run took.
	Took string `json:"took,omitempty"`
	// Build names the binary that ran (its version and commit), and
	// Command the command line; the CLI sets both.
	Build   string `json:"build,omitempty"`
	Command string `json:"command,omitempty"`
}

// Machine is what the figures were measured on.
type Machine struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpuModel,omitempty"`
	// Hardware is `uname -m` (x86_64, aarch64); empty where it cannot run.
	Hardware string `json:"hardware,omitempty"`
	// Memory is /proc/meminfo's MemTotal ("24595796 kB"); empty elsewhere.
	Memory     string `json:"memory,omitempty"`
	GoVersion  string `json:"goVersion"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// Row is one figure beside one baseline measured in the same run.
type Row struct {
	Section string  `json:"section"`
	Measure string  `json:"measure"`
	Value   float64 `json:"value"`
	// Unit is "/s", "ms", "MB", "s" or "actions".
	Unit     string  `json:"unit"`
	Baseline *Figure `json:"baseline,omitempty"`
	// Ratio is Value / Baseline.Value (0 without a baseline).
	Ratio  float64 `json:"ratio,omitempty"`
	Target *Target `json:"target,omitempty"`
	// Detail is what else an engineer reading the figure needs.
	Detail string `json:"detail,omitempty"`
}

// Figure is a baseline.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Target is the performance target for a row, and whether the row met it.
type Target struct {
	Text string `json:"text"`
	Pass bool   `json:"pass"`
	// Unjudged, when set, says why the run cannot judge the target: what
	// it measures was not the bottleneck (Pass is then false and means
	// nothing).
	Unjudged string `json:"unjudged,omitempty"`
}

// optionsJSON is Options with durations as text ("5s"), for people and jq alike.
type optionsJSON struct {
	plainOptions
	EnqueueDuration string `json:"enqueueDuration"`
	LatencyDuration string `json:"latencyDuration"`
}

type plainOptions Options

// MarshalJSON writes durations as text.
func (o Options) MarshalJSON() ([]byte, error) {
	return json.Marshal(optionsJSON{plainOptions(o), o.EnqueueDuration.String(), o.LatencyDuration.String()})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (o *Options) UnmarshalJSON(data []byte) error {
	var in optionsJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*o = Options(in.plainOptions)
	var err error
	if o.EnqueueDuration, err = time.ParseDuration(in.EnqueueDuration); err != nil {
		return fmt.Errorf("EnqueueDuration: %w", err)
	}
	if o.LatencyDuration, err = time.ParseDuration(in.LatencyDuration); err != nil {
		return fmt.Errorf("LatencyDuration: %w", err)
	}
	return nil
}

func newReport(opts Options, dir string) *Report {
	return &Report{At: time.Now().UTC().Truncate(time.Second), Machine: thisMachine(), Dir: dir, Options: opts}
}

func thisMachine() Machine {
	return Machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
		CPUModel: procField("/proc/cpuinfo", "model name"), Hardware: unameMachine(),
		Memory:    procField("/proc/meminfo", "MemTotal"),
		GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
}

// procField is the value of the first "name: value" line of a /proc file
// such as /proc/cpuinfo; empty where there is none.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if key, value, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(key) == name {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// unameMachine is `uname -m`, the hardware name people compare runs by
// (GOARCH says amd64 for every x86_64); empty where uname cannot run.
func unameMachine() string {
	out, err := exec.Command("uname", "-m").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// compare is a row of value against baseline, with the ratio.
func compare(section, measure string, value float64, unit string, base Figure) Row {
	row := Row{Section: section, Measure: measure, Value: value, Unit: unit, Baseline: &base}
	if base.Value != 0 {
		row.Ratio = value / base.Value
	}
	return row
}

// atLeastRatio sets the target "ratio ≥ min".
func (row Row) atLeastRatio(min float64) Row {
	row.Target = &Target{Text: "≥ " + strconv.FormatFloat(min, 'f', -1, 64) + "×", Pass: row.Ratio >= min}
	return row
}

// atMostRatio sets the target "ratio ≤ max".
func (row Row) atMostRatio(max float64) Row {
	row.Target = &Target{Text: "≤ " + strconv.FormatFloat(max, 'f', -1, 64) + "×", Pass: row.Ratio <= max}
	return row
}

// atLeast sets the target "value ≥ min" in the row's unit.
func (row Row) atLeast(min float64) Row {
	row.Target = &Target{Text: "≥ " + formatValue(min, row.Unit), Pass: row.Value >= min}
	return row
}

// atMost sets the target "value ≤ max" in the row's unit.
func (row Row) atMost(max float64) Row {
	row.Target = &Target{Text: "≤ " + strconv.FormatFloat(max, 'f', -1, 64) + " " + row.Unit, Pass: row.Value <= max}
	return row
}

// unjudged withdraws the row's verdict: why says what bound the figure
// instead of what the target is about.
func (row Row) unjudged(why string) Row {
	row.Target = &Target{Text: row.Target.Text, Unjudged: why}
	return row
}

func (row Row) withDetail(format string, args ...any) Row {
	row.Detail = fmt.Sprintf(format, args...)
	return row
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report for people: a header naming the machine, one
// line per figure and baseline, the targets met and missed, then the details.
func (rep *Report) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "outpost bench, %s, %s/%s, %d CPUs", rep.At.Format("2006-01-02 15:04 UTC"), m.OS, m.Arch, m.CPUs)
	if m.CPUModel != "" {
		fmt.Fprintf(w, " (%s)", m.CPUModel)
	}
	fmt.Fprintf(w, ", %s\n\n", m.GoVersion)
	if err := rep.writeRows(w); err != nil {
		return err
	}
	rep.writeSummary(w)
	rep.writeDetails(w)
	return nil
}

// WriteMarkdown writes the report as the "Latest full run" section of
// docs/performance.md, which a person replaces with it whole: the heading,
// when and on what machine, the build and the command, and the table
// (WriteTable's output) in a code block.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		return err
	}
	fmt.Fprint(w, "## Latest full run\n\n")
	fmt.Fprint(w, "Printed by `outpost bench --markdown`. To update it, run the full bench with\n"+
		"`--markdown` on a machine nothing else is using and replace this section with\n"+
		"its output.\n\n")
	fmt.Fprintf(w, "- Date: %s\n", rep.At.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- Machine: %s\n", rep.Machine.describe())
	fmt.Fprintf(w, "- Build: %s\n", orUnknown(rep.Build))
	fmt.Fprintf(w, "- Command: `%s`\n", orUnknown(rep.Command))
	_, err := fmt.Fprintf(w, "\n```\n%s```\n", table.String())
	return err
}

// describe is the machine in one line: "x86_64, linux, 2 CPUs (AMD EPYC),
// 24595796 kB of memory".
func (m Machine) describe() string {
	hardware := m.Hardware
	if hardware == "" {
		hardware = m.Arch
	}
	s := fmt.Sprintf("%s, %s, %d CPUs", hardware, m.OS, m.CPUs)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.Memory != "" {
		s += ", " + m.Memory + " of memory"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (rep *Report) writeRows(w io.Writer) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tvalue\tbaseline (same run)\tbaseline\tratio\ttarget\tresult")
	for _, row := range rep.Rows {
		base, baseValue, ratio := "-", "", ""
		if row.Baseline != nil {
			base, baseValue = row.Baseline.Name, formatValue(row.Baseline.Value, row.Baseline.Unit)
			ratio = strconv.FormatFloat(row.Ratio, 'f', 2, 64)
		}
		target, result := "", ""
		if row.Target != nil {
			target, result = row.Target.Text, "MISS"
			switch {
			case row.Target.Unjudged != "":
				result = "n/a"
			case row.Target.Pass:
				result = "PASS"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Measure, formatValue(row.Value, row.Unit), base, baseValue, ratio, target, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	return nil
}

func (rep *Report) writeSummary(w io.Writer) {
	var pass, miss, unjudged []string
	for _, row := range rep.Rows {
		switch {
		case row.Target == nil:
		case row.Target.Unjudged != "":
			unjudged = append(unjudged, row.Measure+": "+row.Target.Unjudged)
		case row.Target.Pass:
			pass = append(pass, row.Measure)
		default:
			miss = append(miss, row.Measure+" vs "+row.Baseline.Name)
		}
	}
	fmt.Fprintln(w)
	if len(pass)+len(miss)+len(unjudged) > 0 {
		fmt.Fprintf(w, "Targets: %d met, %d missed", len(pass), len(miss))
		if len(miss) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(miss, "; "))
		}
		fmt.Fprint(w, ". ")
	}
	if len(unjudged) > 0 {
		fmt.Fprintf(w, "Not judged: %s. ", strings.Join(unjudged, "; "))
	}
	if rep.Took != "" {
		fmt.Fprintf(w, "The run took %s.", rep.Took)
	}
	fmt.Fprintln(w)
}

func (rep *Report) writeDetails(w io.Writer) {
	first := true
	for _, row := range rep.Rows {
		if row.Detail == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nDetails:")
			first = false
		}
		fmt.Fprintf(w, "  %s: %s\n", row.Measure, row.Detail)
	}
}

// formatValue renders v in unit: rates with thousands separators,
// milliseconds with two decimals under 10 ms, actions whole, cores (CPU
// seconds a second) with two decimals, sizes and seconds with one.
func formatValue(v float64, unit string) string {
	switch unit {
	case "/s":
		return thousands(int64(v+0.5)) + "/s"
	case "actions":
		return strconv.FormatFloat(v, 'f', 0, 64) + " actions"
	case "cores":
		return strconv.FormatFloat(v, 'f', 2, 64) + " cores"
	case "ms":
		if v < 10 {
			return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
		}
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	}
}

// thousands renders n with commas: 41230 → "41,230".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural is "1 caller", "8 callers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(int64(n)) + " " + noun + "s"
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perSecond is n operations over d.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
