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
// inside the engine as well (sqliteAuthorizer), in case the lexer here and
// SQLite's ever disagree.

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
	// params is how many arguments the statement takes: the number of '?'
	// (or the highest ?NNN / @pNNN), or -1 when it names its parameters
	// (:name, @name, $name), whose count the lexer cannot know.
	params int
}

// checkStatement returns an *InvalidError unless sql is one statement the
// database's definition lets a buffered write run with nArgs arguments.
func checkStatement(sql string, db Database, nArgs int) error {
	driver := driverOf(db)
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
	if st.params >= 0 && st.params != nArgs {
		return &InvalidError{Field: "args", Reason: fmt.Sprintf(
			"the statement takes %d argument(s) and %d were given", st.params, nArgs)}
	}
	return nil
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
	tokParam // a positional parameter; n is its number, 0 for a bare '?'
	tokNamedParam
	tokOther
)

type token struct {
	kind tokenKind
	text string // an upper-cased word
	n    int
}

// statementBuilder follows one statement's tokens: its verb (past any WITH
// clause) and its parameters.
type statementBuilder struct {
	first, verb     string
	depth           int
	highest         int // the highest parameter slot used
	named, anything bool
	exec            bool // EXEC anywhere: INSERT … EXEC runs a procedure
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
		// ?NNN takes slot NNN, a bare ? the slot after the highest so far.
		if t.n == 0 {
			b.highest++
		} else {
			b.highest = max(b.highest, t.n)
		}
	case tokNamedParam:
		b.named = true
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
	st := statement{verb: verb, class: classOf(verb), params: b.highest}
	if st.class == classDML && b.exec {
		st.verb, st.class = verb+" … EXEC", classExec
	}
	if b.named {
		st.params = -1
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
// ?, ?NNN, :name, @name and $name; SQL Server (the sqlserver driver) takes
// @name and @pNNN.
func (l *lexer) startsParam(c byte) bool {
	if l.driver == DriverSQLServer {
		return c == '@'
	}
	return c == '?' || c == ':' || c == '@' || c == '$'
}

// param reads a parameter. A lone ':' '@' '$' is an operator, and
// SQL Server's @@NAME a system function, not a parameter.
func (l *lexer) param() token {
	c := l.src[l.pos]
	l.pos++
	if c == '?' {
		return token{kind: tokParam, n: l.number()}
	}
	if c == '@' && l.peek(0) == '@' {
		l.pos++
		l.word()
		return token{kind: tokOther}
	}
	if !isWordStart(l.peek(0)) && !unicode.IsDigit(rune(l.peek(0))) {
		return token{kind: tokOther}
	}
	name := l.word()
	if c == '@' && l.driver == DriverSQLServer && len(name) > 1 && (name[0] == 'p' || name[0] == 'P') {
		if n, err := strconv.Atoi(name[1:]); err == nil && n > 0 {
			return token{kind: tokParam, n: n}
		}
	}
	return token{kind: tokNamedParam}
}

func (l *lexer) number() int {
	start := l.pos
	for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
		l.pos++
	}
	n, _ := strconv.Atoi(l.src[start:l.pos]) // "" gives 0: a bare '?'
	return n
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
