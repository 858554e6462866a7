package broker

// KeyHash exposes the Key_Shared hash to the external tests, which pick
// keys by the range they fall in.
var KeyHash = keyHash

// HashSpace is the size of the Key_Shared hash range.
const HashSpace = hashSpace
