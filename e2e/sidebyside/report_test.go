package sidebyside

import "testing"

func TestReplaceSection(t *testing.T) {
	doc := "# Benchmarks\n\nintro\n"
	got, err := replaceSection(doc, "geo", "| a |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nintro\n\n<!-- sidebyside:geo -->\n| a |\n<!-- /sidebyside:geo -->\n"
	if got != want {
		t.Fatalf("appended:\n%q\nwant\n%q", got, want)
	}
	got, err = replaceSection(got+"tail\n", "geo", "| b |")
	if err != nil {
		t.Fatal(err)
	}
	want = "# Benchmarks\n\nintro\n\n<!-- sidebyside:geo -->\n| b |\n<!-- /sidebyside:geo -->\ntail\n"
	if got != want {
		t.Fatalf("replaced:\n%q\nwant\n%q", got, want)
	}
	if _, err := replaceSection("<!-- sidebyside:geo -->\nno end", "geo", "x"); err == nil {
		t.Fatal("a begin marker without its end was accepted")
	}
}
