package targets

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A buffered write runs exactly one data-changing statement: INSERT,
// UPDATE, DELETE (REPLACE on SQLite, MERGE on SQL Server), optionally
// behind a WITH clause. Anything that changes the schema, the connection
// or other files (DDL, PRAGMA, ATTACH, EXEC) runs only where the database's
// definition lists its class in `allow`; transaction control and reads
// never do: the write runs in a transaction of its own and returns no rows.
//
// The check reads the SQL the way the database's lexer does (strings,
// quoted names, comments), so a ';' or a keyword inside a literal is not
// taken for syntax. On SQLite an authorizer enforces the same classes
// inside the engine as well (sqliteAuthorizer in internal/targetexec), in
// case the lexer here and SQLite's ever disagree.

// Statement classes a database definition can allow (Database.Allow).
const (
	classDML         = "dml"
	classDDL         = AllowDDL
	classPragma      = AllowPragma
	classAttach      = AllowAttach
	classExec        = AllowExec
	classRead        = "read"
	classTransaction = "transaction"
	classOther       = "other"
)

// statement is what the lexer found in a write's SQL.
type statement struct {
	verb  string // the first keyword, upper case ("INSERT"); for WITH, the verb after the CTEs
	class string
	// params are the statement's placeholders as written ("?", "?2",
	// ":name", "@p1"), in order.
	params []string
}

// checkStatement returns an *InvalidError unless sql is one statement the
// database's definition lets a buffered write run with nArgs arguments.
func checkStatement(sql string, db Database, nArgs int) error {
	driver := db.DriverOrDefault()
	stmts, err := lexStatements(sql, driver)
	if err != nil {
		return &InvalidError{Field: "sql", Reason: err.Error()}
	}
	if len(stmts) != 1 {
		return &InvalidError{Field: "sql", Reason: fmt.Sprintf(
			"holds %d statements; a write runs exactly one (split it into several writes)", len(stmts))}
	}
	st := stmts[0]
	if reason := classProblem(st, driver, db.Allow); reason != "" {
		return &InvalidError{Field: "sql", Reason: reason}
	}
	need, reason := argsNeeded(st.params, driver)
	if reason != "" {
		return &InvalidError{Field: "sql", Reason: reason}
	}
	if need != nArgs {
		return &InvalidError{Field: "args", Reason: fmt.Sprintf(
			"the statement takes %d argument(s) and %d were given", need, nArgs)}
	}
	return nil
}

// maxSQLiteParam is SQLite's highest parameter number (?32766).
const maxSQLiteParam = 32766

// argsNeeded is how many arguments params take when the arguments are a
// list bound by position, as a write's args are, or the reason one of
// them can never be bound. The drivers bind a list this way: SQLite
// (modernc.org/sqlite) gives a bare ? the argument after the highest
// parameter before it and ?NNN or $NNN argument NNN; SQL Server
// (go-mssqldb) gives @pNNN argument NNN. Any other name (:name, @name,
// $name, #name on SQLite; @name on SQL Server) is bound only by name, so
// the write would fail at every attempt ("missing named argument").
func argsNeeded(params []string, driver string) (int, string) {
	need, highest := 0, 0 // highest: SQLite's highest parameter index so far
	seen := map[string]bool{}
	for _, p := range params {
		if p == "?" && driver == DriverSQLite {
			highest++
			need = max(need, highest)
			continue
		}
		n, ok := paramNumber(p, driver)
		switch {
		case !ok:
			return 0, namedParamReason(p, driver)
		case p[0] == '?' && (n < 1 || n > maxSQLiteParam):
			return 0, fmt.Sprintf("%s is not a parameter number: SQLite numbers them ?1 to ?%d", p, maxSQLiteParam)
		case p[0] == '?':
			highest = max(highest, n)
		case p[0] == '$' && !seen[p]:
			// SQLite gives a new $NNN the next index, though the
			// driver binds it to argument NNN.
			seen[p] = true
			highest++
		}
		need = max(need, n)
	}
	return need, ""
}

// paramNumber is the argument a numbered placeholder takes: NNN of ?NNN
// or $NNN (SQLite) or @pNNN (SQL Server); ok is false for a placeholder
// bound by name, which a number with a leading zero is too ("?01" is
// bound by the name "01").
func paramNumber(p, driver string) (n int, ok bool) {
	digits := ""
	switch {
	case driver == DriverSQLite && (p[0] == '?' || p[0] == '$'):
		digits = p[1:]
	case driver == DriverSQLServer && len(p) > 2 && (p[1] == 'p' || p[1] == 'P'):
		digits = p[2:]
	}
	if digits == "" || (digits[0] == '0' && (len(digits) > 1 || p[0] != '?')) {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		if p[0] == '?' {
			// All digits, too many of them: past ?32766 all the same.
			return maxSQLiteParam + 1, true
		}
		return 0, false
	}
	return n, true
}

// namedParamReason says why a named placeholder is refused and what to
// write instead.
func namedParamReason(p, driver string) string {
	if driver == DriverSQLServer {
		return fmt.Sprintf("%s names its argument, but args are a list bound by position: write @p1 for the first, @p2 for the second…", p)
	}
	return fmt.Sprintf("%s names its argument, but args are a list bound by position: write ? (or ?1 for the first, ?2 for the second…)", p)
}

// classProblem says why st may not run on the database, or "".
func classProblem(st statement, driver string, allow []string) string {
	switch st.class {
	case classDML:
		return ""
	case classRead:
		return fmt.Sprintf("%s returns rows, which a buffered write cannot give back: a write must change data (INSERT, UPDATE, DELETE)", st.verb)
	case classTransaction:
		return fmt.Sprintf("%s is transaction control: every write already runs in a transaction of its own", st.verb)
	case classDDL, classPragma, classAttach, classExec:
		if !classAppliesTo(st.class, driver) {
			break
		}
		if slices.Contains(allow, st.class) {
			return ""
		}
		return fmt.Sprintf("%s statements are refused unless the database's definition allows them (allow: [%s])", st.verb, st.class)
	}
	return fmt.Sprintf("%s is not a statement a write may run: use INSERT, UPDATE or DELETE", st.verb)
}

// classAppliesTo reports whether the database has statements of class.
func classAppliesTo(class, driver string) bool {
	switch class {
	case classPragma, classAttach:
		return driver == DriverSQLite
	case classExec:
		return driver == DriverSQLServer
	}
	return true
}

// classOf sorts a statement by its first keyword.
func classOf(verb string) string {
	switch verb {
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE":
		return classDML
	case "SELECT", "VALUES", "EXPLAIN", "TABLE":
		return classRead
	case "CREATE", "DROP", "ALTER", "TRUNCATE", "REINDEX", "VACUUM", "ANALYZE":
		return classDDL
	case "PRAGMA":
		return classPragma
	case "ATTACH", "DETACH":
		return classAttach
	case "EXEC", "EXECUTE":
		return classExec
	case "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE":
		return classTransaction
	}
	return classOther
}

// lexer walks SQL text one token at a time.
type lexer struct {
	src    string
	pos    int
	driver string
}

// lexStatements splits sql into its non-empty statements.
func lexStatements(sql, driver string) ([]statement, error) {
	l := &lexer{src: sql, driver: driver}
	var out []statement
	cur := newStatementBuilder()
	for {
		tok, err := l.next()
		if err != nil {
			return nil, err
		}
		switch tok.kind {
		case tokEOF:
			if st, ok := cur.done(); ok {
				out = append(out, st)
			}
			return out, nil
		case tokSemicolon:
			if st, ok := cur.done(); ok {
				out = append(out, st)
			}
			cur = newStatementBuilder()
		default:
			cur.add(tok)
		}
	}
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokWord
	tokSemicolon
	tokOpen
	tokClose
	tokParam // a placeholder; text is as written ("?", "?2", ":name", "@p1")
	tokOther
)

type token struct {
	kind tokenKind
	text string // an upper-cased word, or a placeholder as written
	// assigns marks a SQL Server "@name =": in an EXEC statement the name
	// of a procedure's parameter, not a placeholder.
	assigns bool
}

// statementBuilder follows one statement's tokens: its verb (past any WITH
// clause) and its parameters.
type statementBuilder struct {
	first, verb string
	depth       int
	params      []string
	anything    bool
	exec        bool // EXEC anywhere: INSERT … EXEC runs a procedure
}

func newStatementBuilder() *statementBuilder { return &statementBuilder{} }

func (b *statementBuilder) add(t token) {
	b.anything = true
	switch t.kind {
	case tokOpen:
		b.depth++
	case tokClose:
		b.depth--
	case tokParam:
		if !(b.exec && t.assigns) {
			b.params = append(b.params, t.text)
		}
	case tokWord:
		if t.text == "EXEC" || t.text == "EXECUTE" {
			b.exec = true
		}
		switch {
		case b.first == "":
			b.first = t.text
			if t.text != "WITH" {
				b.verb = t.text
			}
		case b.verb == "" && b.depth == 0 && classOf(t.text) != classOther:
			// The verb after a WITH clause's common table expressions.
			b.verb = t.text
		}
	}
}

func (b *statementBuilder) done() (statement, bool) {
	if !b.anything {
		return statement{}, false
	}
	verb := b.verb
	if verb == "" {
		verb = b.first
	}
	if verb == "" {
		verb = "a statement without a keyword"
	}
	st := statement{verb: verb, class: classOf(verb), params: b.params}
	if st.class == classDML && b.exec {
		st.verb, st.class = verb+" … EXEC", classExec
	}
	return st, true
}

func (l *lexer) peek(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

// next returns the next token, skipping space, comments and literals.
func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '-' && l.peek(1) == '-':
			l.skipLineComment()
		case c == '/' && l.peek(1) == '*':
			if err := l.skipBlockComment(); err != nil {
				return token{}, err
			}
		case c == '\'' || c == '"' || c == '`':
			if err := l.skipQuoted(c, c); err != nil {
				return token{}, err
			}
			return token{kind: tokOther}, nil
		case c == '[':
			if err := l.skipQuoted('[', ']'); err != nil {
				return token{}, err
			}
			return token{kind: tokOther}, nil
		case c == ';':
			l.pos++
			return token{kind: tokSemicolon}, nil
		case c == '(':
			l.pos++
			return token{kind: tokOpen}, nil
		case c == ')':
			l.pos++
			return token{kind: tokClose}, nil
		case l.startsParam(c):
			return l.param(), nil
		case isWordStart(c):
			return token{kind: tokWord, text: strings.ToUpper(l.word())}, nil
		default:
			l.pos++
			return token{kind: tokOther}, nil
		}
	}
	return token{kind: tokEOF}, nil
}

func (l *lexer) skipLineComment() {
	for l.pos < len(l.src) && l.src[l.pos] != '\n' {
		l.pos++
	}
}

// skipBlockComment skips /* … */; SQL Server nests them, SQLite does not.
func (l *lexer) skipBlockComment() error {
	start, depth := l.pos, 0
	for l.pos < len(l.src) {
		switch {
		case l.peek(0) == '/' && l.peek(1) == '*' && (depth == 0 || l.driver == DriverSQLServer):
			depth++
			l.pos += 2
		case l.peek(0) == '*' && l.peek(1) == '/':
			depth--
			l.pos += 2
			if depth == 0 {
				return nil
			}
		default:
			l.pos++
		}
	}
	return fmt.Errorf("comment opened at byte %d is never closed", start)
}

// skipQuoted skips a literal or quoted name; a doubled closing quote
// stands for itself.
func (l *lexer) skipQuoted(open, close byte) error {
	start := l.pos
	l.pos++
	for l.pos < len(l.src) {
		if l.src[l.pos] == close {
			if l.peek(1) == close {
				l.pos += 2
				continue
			}
			l.pos++
			return nil
		}
		l.pos++
	}
	return fmt.Errorf("%c opened at byte %d is never closed", open, start)
}

// startsParam reports a byte that may begin a parameter: SQLite takes
// ?, ?NNN, :name, @name, $name and #name; SQL Server (the sqlserver
// driver) takes @name and @pNNN.
func (l *lexer) startsParam(c byte) bool {
	if l.driver == DriverSQLServer {
		return c == '@'
	}
	return c == '?' || c == ':' || c == '@' || c == '$' || c == '#'
}

// param reads a parameter. A lone ':' '@' '$' '#' is an operator, and
// SQL Server's @@NAME a system function, not a parameter.
func (l *lexer) param() token {
	start := l.pos
	c := l.src[l.pos]
	l.pos++
	if c == '?' {
		l.digits()
		return token{kind: tokParam, text: l.src[start:l.pos]}
	}
	if c == '@' && l.peek(0) == '@' {
		l.pos++
		l.word()
		return token{kind: tokOther}
	}
	if !isWordStart(l.peek(0)) && !unicode.IsDigit(rune(l.peek(0))) {
		return token{kind: tokOther}
	}
	l.word()
	return token{kind: tokParam, text: l.src[start:l.pos], assigns: l.driver == DriverSQLServer && l.equalsFollows()}
}

func (l *lexer) digits() {
	for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
		l.pos++
	}
}

// equalsFollows reports an '=' after spaces at the lexer's position.
func (l *lexer) equalsFollows() bool {
	i := l.pos
	for i < len(l.src) && strings.IndexByte(" \t\r\n\f\v", l.src[i]) >= 0 {
		i++
	}
	return i < len(l.src) && l.src[i] == '='
}

func (l *lexer) word() string {
	start := l.pos
	for l.pos < len(l.src) && (isWordStart(l.src[l.pos]) || (l.src[l.pos] >= '0' && l.src[l.pos] <= '9') || l.src[l.pos] == '$') {
		l.pos++
	}
	return l.src[start:l.pos]
}

// isWordStart reports a byte that begins a keyword or name; bytes of a
// UTF-8 sequence count, as SQLite takes them for name characters.
func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}
