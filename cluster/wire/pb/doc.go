// Package pb holds the Go types of the Pulsar binary protocol: BaseCommand and
// its commands, MessageMetadata, SingleMessageMetadata, BrokerEntryMetadata
// and the protocol enums.
//
// The types are generated from meridian_pulsar_api.proto, Meridian's own copy
// of Pulsar's PulsarApi.proto. Its field numbers, types, labels, defaults and
// enum values are the Pulsar wire contract: clients and brokers written
// against Apache Pulsar decode our bytes and we decode theirs, so a number
// must never change and a retired one must never be reused. Message, field
// and enum names follow upstream too, so pb.BaseCommand_SEND and
// pb.ServerError_ServiceNotReady read as they do in pulsar-client-go. Only the
// proto package (meridian.wire.v1) and the registered file path differ; the
// protobuf registry panics when two files share a path, and pulsar-client-go,
// linked into the same binaries, registers PulsarApi.proto.
//
// The baseline is pulsar-client-go v0.19.0 (protocol v20), plus the newer
// fields, enum values and commands of Apache Pulsar master, each under its
// upstream number. The tests check that every field and value of the
// client's registered descriptor is here unchanged, that the committed
// .pb.go matches the .proto, and that bytes round-trip between the two.
//
// To change the protocol, edit the .proto and regenerate:
//
//	go generate ./cluster/wire/pb
//
// which runs buf (pinned in gen.go) with protoc-gen-go at the version in
// go.mod, then commit the .proto and the .pb.go together.
package pb
