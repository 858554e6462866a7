package schema

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// racingStore runs before once, just before the first Create that goes
// through it: another broker getting its write in between this one's read
// and its write.
type racingStore struct {
	meta.Store
	once   sync.Once
	before func()
}

func (s *racingStore) Create(ctx context.Context, key string, value []byte, lease meta.LeaseID) (int64, error) {
	s.once.Do(s.before)
	return s.Store.Create(ctx, key, value, lease)
}

// TestLosingTheRace makes a writer lose the create of the version it read
// as next, and checks what it does then: return the winner's version when
// the winner wrote the same schema, add after the winner when its schema is
// compatible with the winner's, and refuse when it is not.
func TestLosingTheRace(t *testing.T) {
	base := record(fID + "," + fName)
	withAge := record(fID + "," + fName + "," + fAgeDef)
	// Compatible with base under FULL, not with withAge: the same field
	// name with another type.
	ageString := record(fID + "," + fName + `,{"name":"Age","type":"string","default":""}`)
	cases := []struct {
		name    string
		winner  string
		loser   string
		want    Version
		wantErr error
	}{
		{"same schema", withAge, withAge, 1, nil},
		{"compatible schema", withAge, record(fID + "," + fName + `,{"name":"Email","type":"string","default":""}`), 2, nil},
		{"incompatible with the winner", withAge, ageString, NoVersion, ErrIncompatible},
	}
	for _, s := range stores {
		for _, c := range cases {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				ctx := ctxT(t)
				region := uniqueRegion()
				st := s.open(t)
				mustCreate(t, newRegistry(t, st, region), avroInfo(t, base), global.SchemaFull, 0)
				rs := &racingStore{Store: st}
				rs.before = func() {
					mustCreate(t, newRegistry(t, st, region), avroInfo(t, c.winner), global.SchemaFull, 1)
				}
				v, err := newRegistry(t, rs, region).GetOrCreate(ctx, topic, avroInfo(t, c.loser), global.SchemaFull)
				if !errors.Is(err, c.wantErr) || v != c.want {
					t.Fatalf("loser: version %d, %v; want %d, %v", v, err, c.want, c.wantErr)
				}
				if c.wantErr != nil && !strings.Contains(err.Error(), "version 1") {
					t.Fatalf("the refusal should name the winner's version 1: %v", err)
				}
				kvs, _, err := st.List(ctx, meta.Prefix(topicKey(region, topic)))
				if err != nil {
					t.Fatal(err)
				}
				if want := max(int(c.want), 1) + 1; len(kvs) != want {
					t.Fatalf("%d versions stored, want %d", len(kvs), want)
				}
			})
		}
	}
}

// TestDeleteRacesAnAdd: a delete that loses its create to a new schema
// puts its tombstone after it, so that the schema it raced is deleted too.
func TestDeleteRacesAnAdd(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			ctx := ctxT(t)
			region := uniqueRegion()
			st := s.open(t)
			mustCreate(t, newRegistry(t, st, region), avroInfo(t, record(fID)), global.SchemaFull, 0)
			rs := &racingStore{Store: st}
			rs.before = func() {
				mustCreate(t, newRegistry(t, st, region), avroInfo(t, record(fID+","+fAgeDef)), global.SchemaFull, 1)
			}
			r := newRegistry(t, rs, region)
			if v, err := r.Delete(ctx, topic); err != nil || v != 2 {
				t.Fatalf("Delete = %d, %v; want 2", v, err)
			}
			if _, _, err := r.Latest(ctx, topic); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Latest: %v", err)
			}
		})
	}
}
