package e2e

import "testing"

func TestReplaceDocSection(t *testing.T) {
	doc := "# Benchmarks\n\nintro mentions `<!-- geo -->` in passing\n"
	got, err := replaceDocSection(doc, "geo", "| a |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := doc + "\n<!-- geo -->\n| a |\n<!-- /geo -->\n"
	if got != want {
		t.Fatalf("appended:\n%q\nwant\n%q", got, want)
	}
	got, err = replaceDocSection(got+"tail\n", "geo", "| b |")
	if err != nil {
		t.Fatal(err)
	}
	want = doc + "\n<!-- geo -->\n| b |\n<!-- /geo -->\ntail\n"
	if got != want {
		t.Fatalf("replaced:\n%q\nwant\n%q", got, want)
	}
	if _, err := replaceDocSection("<!-- geo -->\nno end", "geo", "x"); err == nil {
		t.Fatal("a begin marker without its end was accepted")
	}
}
