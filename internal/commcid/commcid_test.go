package commcid

import (
	"encoding/hex"
	"math/rand"
	"strings"
	"testing"
)

func TestKnownPieceCID(t *testing.T) {
	// commD of an all-zero 32 GiB sector and its piece CID, as lotus prints them.
	var d [32]byte
	if _, err := hex.Decode(d[:], []byte("077e5fde35c50a9303a55009e3498a4ebedff39c42b710b730d8ec7ac7afa63e")); err != nil {
		t.Fatal(err)
	}
	got, err := PieceCID(d)
	if want := "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq"; err != nil || got != want {
		t.Fatalf("PieceCID = %q %v, want %q", got, err, want)
	}
	back, err := ParsePieceCID(got)
	if err != nil || back != d {
		t.Errorf("round trip: %x %v", back, err)
	}
}

func TestRoundTripsAndKinds(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 100; i++ {
		var c [32]byte
		r.Read(c[:])
		p, err1 := PieceCID(c)
		s, err2 := SealedCID(c)
		if err1 != nil || err2 != nil || !strings.HasPrefix(p, "baga6ea4seaq") || !strings.HasPrefix(s, "bagboea4b5abc") {
			t.Fatalf("%x: %q %q %v %v", c, p, s, err1, err2)
		}
		if got, err := ParseSealedCID(s); err != nil || got != c {
			t.Fatalf("sealed round trip %x: %x %v", c, got, err)
		}
		if _, err := ParsePieceCID(s); err == nil {
			t.Fatalf("a sealed CID parsed as a piece CID")
		}
	}
	for _, bad := range []string{"", "baga6ea4seaqzzzz", "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"} {
		if _, err := ParsePieceCID(bad); err == nil {
			t.Errorf("ParsePieceCID(%q) accepted", bad)
		}
	}
}
