package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// An unknown user name is checked against a hash of the same cost as the
// dearest user's, so it takes as long as a wrong password: the time of the
// answer tells nothing of which names exist. (Timing itself is not
// measured: on a loaded machine it would prove nothing.)
func TestUnknownNameCostsAsMuchAsAWrongPassword(t *testing.T) {
	t.Parallel()
	hashAt := func(cost int) string {
		h, err := bcrypt.GenerateFromPassword([]byte("pass"), cost)
		require.NoError(t, err)
		return string(h)
	}
	a, err := newAuthenticator(Auth{Users: map[string]User{
		"ana": {PasswordHash: hashAt(bcrypt.MinCost), Role: RoleOperator},
		"vic": {PasswordHash: hashAt(bcrypt.MinCost + 1), Role: RoleViewer},
	}}, time.Now)
	require.NoError(t, err)
	cost, err := bcrypt.Cost(a.dummyHash)
	require.NoError(t, err)
	require.Equal(t, bcrypt.MinCost+1, cost)
}
