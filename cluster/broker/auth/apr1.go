package auth

import (
	"crypto/md5"
	"strings"
)

// apr1Magic starts Apache's MD5-crypt hashes (htpasswd -m), the default
// scheme of Apache's htpasswd and the one Pulsar's basic-auth docs use.
const apr1Magic = "$apr1$"

// APR1 returns Apache's MD5-crypt hash of password with salt, in the form
// htpasswd writes: "$apr1$<salt>$<22 chars>". Only the salt's first 8
// characters, up to any '$', are used.
//
// The algorithm is Poul-Henning Kamp's FreeBSD MD5-crypt with the magic
// "$apr1$" in place of "$1$" (apr_md5_encode in APR's apr_md5.c). MD5 is
// weak and the 1000 rounds are cheap: this exists so that existing htpasswd
// files keep working; new users are better given bcrypt hashes.
func APR1(password, salt string) string {
	if i := strings.IndexByte(salt, '$'); i >= 0 {
		salt = salt[:i]
	}
	if len(salt) > 8 {
		salt = salt[:8]
	}
	pw := []byte(password)

	alt := md5.New()
	alt.Write(pw)
	alt.Write([]byte(salt))
	alt.Write(pw)
	altSum := alt.Sum(nil)

	ctx := md5.New()
	ctx.Write(pw)
	ctx.Write([]byte(apr1Magic))
	ctx.Write([]byte(salt))
	for n := len(pw); n > 0; n -= 16 {
		ctx.Write(altSum[:min(n, 16)])
	}
	// The original's quirk, kept for compatibility: a zero byte for each
	// set bit of the length and the password's first byte for each clear
	// one.
	for n := len(pw); n != 0; n >>= 1 {
		if n&1 != 0 {
			ctx.Write([]byte{0})
		} else {
			ctx.Write(pw[:1])
		}
	}
	sum := ctx.Sum(nil)

	for i := range 1000 {
		r := md5.New()
		if i&1 != 0 {
			r.Write(pw)
		} else {
			r.Write(sum)
		}
		if i%3 != 0 {
			r.Write([]byte(salt))
		}
		if i%7 != 0 {
			r.Write(pw)
		}
		if i&1 != 0 {
			r.Write(sum)
		} else {
			r.Write(pw)
		}
		sum = r.Sum(nil)
	}

	var out strings.Builder
	out.WriteString(apr1Magic)
	out.WriteString(salt)
	out.WriteByte('$')
	for _, g := range [][3]int{{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}} {
		crypt64(&out, uint(sum[g[0]])<<16|uint(sum[g[1]])<<8|uint(sum[g[2]]), 4)
	}
	crypt64(&out, uint(sum[11]), 2)
	return out.String()
}

// crypt64 writes the n low 6-bit groups of v, least significant first, in
// crypt's base-64 alphabet.
func crypt64(b *strings.Builder, v uint, n int) {
	const alphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for range n {
		b.WriteByte(alphabet[v&0x3f])
		v >>= 6
	}
}

// splitAPR1 splits "$apr1$salt$sum" into its salt and sum, checking their
// lengths.
func splitAPR1(hash string) (salt, sum string, ok bool) {
	salt, sum, ok = strings.Cut(strings.TrimPrefix(hash, apr1Magic), "$")
	return salt, sum, ok && len(salt) <= 8 && len(sum) == 22
}
