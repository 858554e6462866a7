package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestAPR1KnownAnswers: vectors from `openssl passwd -apr1 -salt SALT PW`
// (which matches Apache's htpasswd -m).
func TestAPR1KnownAnswers(t *testing.T) {
	for _, tc := range []struct{ password, salt, want string }{
		{"password", "saltsalt", "$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/"},
		{"", "xxxxxxxx", "$apr1$xxxxxxxx$AL/DOdqyMUurcg0cPNW/P1"},
		{"p@ss:w0rd é", "ab", "$apr1$ab$5Lf6GwLDlrKNXrhIW48gy."},
		{"a-very-long-password-longer-than-sixteen-bytes", "12345678", "$apr1$12345678$n5XRIJyZMoMUa7fedve0c."},
		// The salt stops at '$' and at 8 characters.
		{"password", "saltsalt$yAAkm4libquA.ZWLHbSBq/", "$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/"},
		{"password", "saltsaltEXTRA", "$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/"},
	} {
		if got := APR1(tc.password, tc.salt); got != tc.want {
			t.Errorf("APR1(%q, %q) = %s; want %s", tc.password, tc.salt, got, tc.want)
		}
	}
}

func TestBasic(t *testing.T) {
	bc, err := bcrypt.GenerateFromPassword([]byte("bcrypt-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// htpasswd -B writes $2y$; x/crypto writes $2a$. Both, and $2b$, verify.
	bcY := "$2y$" + string(bc[4:])
	bcB := "$2b$" + string(bc[4:])
	htpasswd := strings.Join([]string{
		"# users",
		"apr:$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/",
		"",
		"colon:$apr1$ab$5Lf6GwLDlrKNXrhIW48gy.",
		"bca:" + string(bc),
		"bcy:" + bcY,
		"bcb:" + bcB,
	}, "\n")
	// basicAuthConf as data: URL, path, and Pulsar's bare base64.
	for _, conf := range []string{dataURL([]byte(htpasswd)), writeFile(t, "htpasswd", []byte(htpasswd)), base64.StdEncoding.EncodeToString([]byte(htpasswd))} {
		b, err := NewBasic(BasicConfig{Conf: conf})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			data string
			role string // "" = refused
			msg  string
		}{
			{"apr:password", "apr", ""},
			{"colon:p@ss:w0rd é", "colon", ""}, // a password may hold ':'
			{"bca:bcrypt-pw", "bca", ""},
			{"bcy:bcrypt-pw", "bcy", ""},
			{"bcb:bcrypt-pw", "bcb", ""},
			{"apr:wrong", "", "unknown user or wrong password"},
			{"bcy:wrong", "", "unknown user or wrong password"},
			{"nobody:password", "", "unknown user or wrong password"},
			{"apr:", "", "unknown user or wrong password"},
			{"apr", "", "not user:password"},
			{":password", "", "not user:password"},
		} {
			role, err := b.Authenticate(t.Context(), Credentials{Data: []byte(tc.data)})
			switch {
			case tc.role != "" && (err != nil || role != tc.role):
				t.Errorf("Authenticate(%q) = %q, %v; want %q", tc.data, role, err, tc.role)
			case tc.role == "" && (!errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("Authenticate(%q) = %q, %v; want a refusal mentioning %q", tc.data, role, err, tc.msg)
			}
		}
	}
}

func TestBasicFileErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"", "is empty"},
		{"# only a comment\n", "no users"},
		{"nouser\n", "line 1 is not user:hash"},
		{"a:$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/\na:$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/\n", `line 2: user "a" is listed twice`},
		{"a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "unsupported hash scheme"},
		{"a:plaintext\n", "unsupported hash scheme"},
		{"a:$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/\n", "unsupported hash scheme"},
		{"a:$apr1$salt\n", "malformed $apr1$"},
		{"a:$2y$99$short\n", "malformed bcrypt"},
	} {
		conf := dataURL([]byte(tc.file))
		if tc.file == "" {
			conf = writeFile(t, "empty", nil)
		}
		_, err := NewBasic(BasicConfig{Conf: conf})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewBasic(%q) = %v; want an error mentioning %q", tc.file, err, tc.want)
		}
	}
	if _, err := NewBasic(BasicConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewBasic without Conf = %v; want ErrInvalidConfig", err)
	}
}
