package global

import "testing"

func TestReplicatorDispatchRateFrom(t *testing.T) {
	tenant := TenantInfo{AllowedClusters: []string{"a", "b"}}
	nsRates := Extra{ExtraReplicatorDispatchRate: []byte(`{"a":{"dispatchThrottlingRateInMsg":50,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1},` +
		`"b":{"dispatchThrottlingRateInMsg":-1,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1}}`)}
	topicRate := Extra{ExtraReplicatorDispatchRate: []byte(`{"dispatchThrottlingRateInMsg":0,"dispatchThrottlingRateInByte":4096,"ratePeriodInSecond":2}`)}
	for _, tc := range []struct {
		name   string
		ns     Extra
		topic  *TopicPolicies
		region string
		want   DispatchRate
		ok     bool
	}{
		{"none set", nil, nil, "a", DispatchRate{}, false},
		{"namespace, this region", nsRates, nil, "a", DispatchRate{50, -1, false, 1}, true},
		{"namespace, a rate that limits nothing", nsRates, nil, "b", DispatchRate{}, false},
		{"namespace, another region has none", nsRates, nil, "c", DispatchRate{}, false},
		{"topic over namespace", nsRates, &TopicPolicies{Extra: topicRate}, "a", DispatchRate{0, 4096, false, 2}, true},
		{"topic for every region", nil, &TopicPolicies{Extra: topicRate}, "b", DispatchRate{0, 4096, false, 2}, true},
		{"a malformed topic rate is unset", nsRates, &TopicPolicies{Extra: Extra{ExtraReplicatorDispatchRate: []byte(`{"ratePeriodInSecond":0}`)}},
			"a", DispatchRate{50, -1, false, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := Policies{ReplicationClusters: []string{"a", "b"}, Extra: tc.ns}
			got, ok := Resolve(DefaultBrokerDefaults(), tenant, ns, tc.topic).ReplicatorDispatchRateFrom(tc.region)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("ReplicatorDispatchRateFrom(%s) = %+v, %v; want %+v, %v", tc.region, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDispatchRateValidate(t *testing.T) {
	for _, tc := range []struct {
		r    DispatchRate
		good bool
	}{
		{DispatchRate{-1, -1, false, 1}, true},
		{DispatchRate{10, 1 << 20, false, 60}, true},
		{DispatchRate{10, 0, false, 0}, false},
		{DispatchRate{10, 0, true, 1}, true}, // relative to the publish rate
	} {
		if err := tc.r.Validate(); (err == nil) != tc.good {
			t.Errorf("%+v.Validate() = %v, want good=%v", tc.r, err, tc.good)
		}
	}
}
