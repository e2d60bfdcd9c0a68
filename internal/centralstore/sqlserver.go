package centralstore

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/microsoft/go-mssqldb" // registers the "sqlserver" driver
)

var sqlServerDialect = dialect{
	name:     "sqlserver",
	numbered: true,
	schema: []string{`IF OBJECT_ID(N'notifications', N'U') IS NULL
	CREATE TABLE notifications (
		notification_id    VARCHAR(64) NOT NULL PRIMARY KEY,
		type               VARCHAR(32) NOT NULL,
		list_name          NVARCHAR(256) NOT NULL,
		subject            NVARCHAR(1000) NOT NULL,
		body               NVARCHAR(MAX) NOT NULL,
		type_data          NVARCHAR(MAX) NOT NULL DEFAULT '',
		status             VARCHAR(16) NOT NULL,
		retry_count        INT NOT NULL DEFAULT 0,
		last_error         NVARCHAR(MAX) NOT NULL DEFAULT '',
		resolved_targets   NVARCHAR(MAX) NOT NULL DEFAULT 'null',
		source_site_id     NVARCHAR(128) NOT NULL,
		source_instance_id NVARCHAR(256) NOT NULL DEFAULT '',
		source_script      NVARCHAR(256) NOT NULL DEFAULT '',
		source_node        VARCHAR(64) NOT NULL DEFAULT '',
		site_enqueued_at   DATETIME2 NOT NULL,
		created_at         DATETIME2 NOT NULL,
		last_attempt_at    DATETIME2 NULL,
		next_attempt_at    DATETIME2 NULL,
		delivered_at       DATETIME2 NULL
	)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_status')
	CREATE INDEX notifications_status ON notifications (status, source_site_id)`,
	},
	// UPDLOCK+HOLDLOCK makes the check and the insert one atomic step; @p1
	// is the first placeholder, the notification id.
	insertIfMissing: `INSERT INTO notifications (` + notificationColumns + `)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
	WHERE NOT EXISTS (SELECT 1 FROM notifications WITH (UPDLOCK, HOLDLOCK) WHERE notification_id = @p1)`,
}

// OpenSQLServer opens the central store on SQL Server and creates its tables.
func OpenSQLServer(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		return nil, fmt.Errorf("open central store on sql server: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to sql server: %w", err)
	}
	s := &Store{db: db, dialect: sqlServerDialect}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
