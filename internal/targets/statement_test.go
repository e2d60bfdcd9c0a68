package targets

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckStatement(t *testing.T) {
	t.Parallel()
	lite := Database{Driver: DriverSQLite}
	mssql := Database{Driver: DriverSQLServer}
	allow := func(db Database, classes ...string) Database { db.Allow = classes; return db }
	for _, tc := range []struct {
		name  string
		db    Database
		sql   string
		nArgs int
		want  string // "" for allowed, else part of the refusal
	}{
		{"insert", lite, `INSERT INTO readings (tag, value) VALUES (?, ?)`, 2, ""},
		{"trailing semicolon and comment", lite, "UPDATE readings SET value = ? -- fix; DROP\n;", 1, ""},
		{"semicolon in a string", lite, `INSERT INTO readings (tag) VALUES ('a;b; DROP TABLE readings')`, 0, ""},
		{"quoted names", lite, `DELETE FROM "we;ird" WHERE [x;y] = ? AND ` + "`z;`" + ` = ?`, 2, ""},
		{"block comment", lite, `/* ; ATTACH */ DELETE FROM readings`, 0, ""},
		{"numbered params", lite, `UPDATE readings SET value = ?2 WHERE tag = ?1`, 2, ""},
		{"bare after numbered", lite, `UPDATE readings SET a = ?1, b = ?`, 2, ""},
		// Arguments are a list, bound by position: a name can never be bound.
		{"named colon", lite, `INSERT INTO readings (tag, value) VALUES (:a, :b)`, 2, ":a names its argument"},
		{"named at", lite, `INSERT INTO readings (tag, value) VALUES (@a, @b)`, 1, "@a names its argument"},
		{"named dollar", lite, `INSERT INTO readings (tag, value) VALUES ($a, $b)`, 2, "$a names its argument"},
		{"named hash", lite, `INSERT INTO readings (tag, value) VALUES (#a, ?)`, 2, "#a names its argument"},
		{"bare then named", lite, `INSERT INTO readings (tag, value) VALUES (?, :b)`, 1, ":b names its argument"},
		{"named digits", lite, `INSERT INTO readings (tag) VALUES (:1)`, 1, ":1 names its argument"},
		{"numbered with a leading zero", lite, `INSERT INTO readings (tag) VALUES (?01)`, 1, "?01 names its argument"},
		{"numbered zero", lite, `INSERT INTO readings (tag) VALUES (?0)`, 1, "?0 is not a parameter number"},
		{"numbered past the limit", lite, `INSERT INTO readings (tag) VALUES (?32767)`, 32767, "?32767 is not a parameter number"},
		{"dollar numbered", lite, `INSERT INTO readings (tag, value) VALUES ($1, $2)`, 2, ""},
		{"dollar numbered missing", lite, `INSERT INTO readings (tag, value) VALUES ($1, $3)`, 2, "takes 3 argument(s) and 2 were given"},
		{"bare after dollar numbered", lite, `INSERT INTO readings (tag, value) VALUES ($2, ?)`, 2, ""},
		{"named forms in literals and comments", lite, "INSERT INTO readings (tag, \"v:al\") VALUES (?, ':a @b $c #d ?2') -- :e ?\n/* @f $1 */", 1, ""},
		{"with insert", lite, `WITH x(v) AS (SELECT ?) INSERT INTO readings (tag) SELECT v FROM x`, 1, ""},
		{"replace", lite, `REPLACE INTO readings (tag) VALUES (?)`, 1, ""},
		{"two statements", lite, `INSERT INTO readings (tag) VALUES ('a'); DROP TABLE readings`, 0, "holds 2 statements"},
		{"statement hidden after a comment", lite, "INSERT INTO readings (tag) VALUES ('a') /* x */; DELETE FROM readings", 0, "holds 2 statements"},
		{"attach", lite, `ATTACH DATABASE ? AS x`, 1, "ATTACH statements are refused unless the database's definition allows them (allow: [attach])"},
		{"detach", lite, `DETACH x`, 0, "allow: [attach]"},
		{"pragma", lite, `PRAGMA query_only=1`, 0, "allow: [pragma]"},
		{"create", lite, `CREATE TABLE t (a)`, 0, "allow: [ddl]"},
		{"drop lower case", lite, `drop table readings`, 0, "DROP statements are refused"},
		{"vacuum into", lite, `VACUUM INTO '/tmp/copy.db'`, 0, "allow: [ddl]"},
		{"select", lite, `SELECT * FROM readings`, 0, "SELECT returns rows"},
		{"with select", lite, `WITH x AS (SELECT 1) SELECT * FROM x`, 0, "SELECT returns rows"},
		{"begin", lite, `BEGIN`, 0, "transaction control"},
		{"other", lite, `REINDEXX`, 0, "is not a statement a write may run"},
		{"missing argument", lite, `INSERT INTO readings (tag, value) VALUES (?, ?)`, 1, "takes 2 argument(s) and 1 were given"},
		{"surplus argument", lite, `DELETE FROM readings`, 1, "takes 0 argument(s) and 1 were given"},
		{"unterminated string", lite, `INSERT INTO readings (tag) VALUES ('a)`, 0, "' opened at byte 35 is never closed"},
		{"unterminated comment", lite, `DELETE FROM readings /* ;`, 0, "comment opened at byte 21 is never closed"},
		{"empty after comments", lite, `-- nothing`, 0, "holds 0 statements"},
		{"allowed pragma", allow(lite, AllowPragma), `PRAGMA user_version = 3`, 0, ""},
		{"allowed ddl", allow(lite, AllowDDL), `CREATE TABLE t (a)`, 0, ""},
		{"allowed ddl is still one statement", allow(lite, AllowDDL), `CREATE TABLE t (a); DROP TABLE readings`, 0, "holds 2 statements"},
		{"pragma is not sql server", allow(mssql, AllowPragma), `PRAGMA x`, 0, "is not a statement a write may run"},
		{"sql server positional", mssql, `UPDATE readings SET value = @p2 WHERE tag = @p1`, 2, ""},
		{"sql server missing", mssql, `UPDATE readings SET value = @p2 WHERE tag = @p1`, 1, "takes 2 argument(s) and 1 were given"},
		{"sql server system function", mssql, `UPDATE readings SET n = @@ROWCOUNT WHERE tag = @p1`, 1, ""},
		{"sql server nested comment", mssql, `DELETE FROM readings /* a /* b */ ; */`, 0, ""},
		{"sql server merge", mssql, `MERGE readings AS t USING (SELECT @p1 AS tag) AS s ON t.tag = s.tag WHEN NOT MATCHED THEN INSERT (tag) VALUES (s.tag);`, 1, ""},
		{"sql server exec", mssql, `EXEC dbo.Cleanup`, 0, "allow: [exec]"},
		{"sql server insert exec", mssql, `INSERT INTO readings EXEC dbo.Anything`, 0, "INSERT … EXEC statements are refused"},
		{"sql server allowed exec", allow(mssql, AllowExec), `EXEC dbo.Cleanup @p1`, 1, ""},
		{"sql server procedure parameter names", allow(mssql, AllowExec), `EXEC dbo.Cleanup @Tag = @p1, @Before=@p2`, 2, ""},
		{"sql server named", mssql, `UPDATE readings SET value = @value WHERE tag = @p1`, 2, "@value names its argument"},
		{"sql server named beside =", mssql, `UPDATE readings SET value = 1 WHERE @tag = tag`, 1, "@tag names its argument"},
		{"sql server procedure argument named", allow(mssql, AllowExec), `EXEC dbo.Cleanup @Tag = @tag`, 1, "@tag names its argument"},
		{"sql server p0", mssql, `DELETE FROM readings WHERE tag = @p0`, 1, "@p0 names its argument"},
		{"sql server named forms in literals and comments", mssql, "DELETE FROM [@x] WHERE tag = @p1 AND note = N'@y' -- @z\n/* @w /* @v */ */", 1, ""},
		{"sql server has no ? or :name", mssql, `DELETE FROM readings WHERE tag = @p1 AND note <> '?' AND x = 1`, 1, ""},
		{"sql server truncate", mssql, `TRUNCATE TABLE readings`, 0, "allow: [ddl]"},
		{"sql server use", mssql, `USE master`, 0, "USE is not a statement a write may run"},
	} {
		err := checkStatement(tc.sql, tc.db, tc.nArgs)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		var invalid *InvalidError
		require.ErrorAs(t, err, &invalid, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
}
