package sitedaemon

// The tests of package sitedaemon_test import airgapsync, itself an
// importer of this package, to export and ack as the CLI does; they start
// daemons with these.
var (
	DefaultOptions         = defaultOptions
	StartDaemonCentralDown = startDaemonCentralDown
)
