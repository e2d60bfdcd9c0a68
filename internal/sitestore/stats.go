package sitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// BufferStat is the buffer's content for one category.
type BufferStat struct {
	Category string
	Depth    int
	// Oldest is when the oldest buffered row was created.
	Oldest time.Time
	// Parked counts the rows parked on the site: central refused their
	// hand-off for good (ParkUnforwardable) and they wait for an operator.
	Parked int
}

// BufferStats counts buffered rows per category, with the oldest of each
// and how many are parked on the site.
func (s *Store) BufferStats(ctx context.Context) ([]BufferStat, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT category, count(*), min(created_at), sum(parked_on_site) FROM buffer GROUP BY category ORDER BY category`)
	if err != nil {
		return nil, fmt.Errorf("buffer stats: %w", err)
	}
	defer rows.Close()
	var out []BufferStat
	for rows.Next() {
		var st BufferStat
		var oldest int64
		if err := rows.Scan(&st.Category, &st.Depth, &oldest, &st.Parked); err != nil {
			return nil, fmt.Errorf("buffer stats: %w", err)
		}
		st.Oldest = time.Unix(0, oldest).UTC()
		out = append(out, st)
	}
	return out, rows.Err()
}

// TrackingCounts counts tracking rows per status.
func (s *Store) TrackingCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT status, count(*) FROM tracking GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("tracking counts: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("tracking counts: %w", err)
		}
		out[status] = n
	}
	return out, rows.Err()
}

// TelemetryLag is what central has not received yet: how many tracking
// changes, and when the oldest of them was made (zero when none).
func (s *Store) TelemetryLag(ctx context.Context) (int, time.Time, error) {
	var n int
	var oldest sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT count(*), min(updated_at) FROM tracking_changes
		WHERE seq > (SELECT value FROM meta WHERE name = 'telemetry_cursor')`).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("telemetry lag: %w", err)
	}
	if !oldest.Valid {
		return n, time.Time{}, nil
	}
	return n, time.Unix(0, oldest.Int64).UTC(), nil
}

// Ping checks the store can take writes: its file is the one it opened,
// and a write through the group-commit writer commits.
func (s *Store) Ping(ctx context.Context) error {
	err := s.writer.doOnStandby(ctx, func(tx *writeTx) error {
		// Not replicated (tx.tx): it changes nothing, and a standby answers it too.
		_, err := tx.tx.ExecContext(tx.ctx, `UPDATE meta SET value = value WHERE name = 'tracking_seq'`)
		return err
	})
	if err != nil {
		return fmt.Errorf("site store: %w", err)
	}
	return nil
}
