package markdown

import "testing"

func TestBlocks(t *testing.T) {
	page := "# Title\n\ntext\n\n```sh\necho one\n```\n\n## Step (a)\n\n- a list item:\n\n  ```yaml\n  key: value\n    nested: 1\n  ```\n"
	blocks, err := Blocks([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("%d blocks, want 2: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.Lang != "sh" || b.Heading != "Title" || b.Line != 6 || b.Body != "echo one\n" {
		t.Errorf("first block %+v", b)
	}
	if b := blocks[1]; b.Lang != "yaml" || b.Heading != "Step (a)" || b.Body != "key: value\n  nested: 1\n" {
		t.Errorf("indented block %+v", b)
	}
	if got := Lang(blocks, "sh"); len(got) != 1 || got[0].Body != "echo one\n" {
		t.Errorf("Lang(sh) = %+v", got)
	}
	if _, err := Blocks([]byte("```sh\nnever closed\n")); err == nil {
		t.Error("an unclosed block is no error")
	}
}
