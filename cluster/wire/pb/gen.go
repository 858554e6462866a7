package pb

// buf is pinned here and fetched by the Go toolchain; protoc-gen-go comes from
// go.mod (see buf.gen.yaml). Nothing needs installing by hand.
//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate
