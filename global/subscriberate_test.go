package global

import "testing"

func TestSubscribeRateIn(t *testing.T) {
	tenant := TenantInfo{AllowedClusters: []string{"a", "b"}}
	nsRates := Extra{ExtraSubscribeRate: []byte(`{"a":{"subscribeThrottlingRatePerConsumer":5,"ratePeriodInSecond":10},` +
		`"b":{"subscribeThrottlingRatePerConsumer":-1,"ratePeriodInSecond":30}}`)}
	topicRate := Extra{ExtraTopicSubscribeRate: []byte(`{"subscribeThrottlingRatePerConsumer":2,"ratePeriodInSecond":1}`)}
	broker := DefaultBrokerDefaults()
	broker.SubscribeRate = SubscribeRate{7, 60}
	for _, tc := range []struct {
		name   string
		d      BrokerDefaults
		ns     Extra
		topic  *TopicPolicies
		region string
		want   SubscribeRate
		ok     bool
	}{
		{"none set", DefaultBrokerDefaults(), nil, nil, "a", SubscribeRate{}, false},
		{"the broker's", broker, nil, nil, "a", SubscribeRate{7, 60}, true},
		{"namespace, this region", broker, nsRates, nil, "a", SubscribeRate{5, 10}, true},
		{"namespace, a rate that limits nothing lifts the broker's", broker, nsRates, nil, "b", SubscribeRate{}, false},
		{"namespace, another region has none: the broker's", broker, nsRates, nil, "c", SubscribeRate{7, 60}, true},
		{"topic over namespace", broker, nsRates, &TopicPolicies{Extra: topicRate}, "a", SubscribeRate{2, 1}, true},
		{"topic for every region", DefaultBrokerDefaults(), nil, &TopicPolicies{Extra: topicRate}, "b", SubscribeRate{2, 1}, true},
		{"a malformed topic rate is unset", DefaultBrokerDefaults(), nsRates,
			&TopicPolicies{Extra: Extra{ExtraTopicSubscribeRate: []byte(`{"subscribeThrottlingRatePerConsumer":3,"ratePeriodInSecond":0}`)}},
			"a", SubscribeRate{5, 10}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := Policies{ReplicationClusters: []string{"a", "b"}, Extra: tc.ns}
			got, ok := Resolve(tc.d, tenant, ns, tc.topic).SubscribeRateIn(tc.region)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("SubscribeRateIn(%s) = %+v, %v; want %+v, %v", tc.region, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestSubscribeRateValidate(t *testing.T) {
	for _, tc := range []struct {
		r    SubscribeRate
		good bool
	}{
		{SubscribeRate{-1, 30}, true},
		{SubscribeRate{0, 0}, true}, // limits nothing
		{SubscribeRate{10, 1}, true},
		{SubscribeRate{10, 0}, false},
	} {
		if err := tc.r.Validate(); (err == nil) != tc.good {
			t.Errorf("%+v.Validate() = %v, want good=%v", tc.r, err, tc.good)
		}
	}
	d := DefaultBrokerDefaults()
	d.SubscribeRate = SubscribeRate{10, 0}
	if d.Validate() == nil {
		t.Error("BrokerDefaults with a subscribe rate over no period validated")
	}
}

func TestMaxTopicsPerNamespace(t *testing.T) {
	broker := DefaultBrokerDefaults()
	broker.MaxTopicsPerNamespace = 100
	for _, tc := range []struct {
		name string
		d    BrokerDefaults
		ns   Extra
		want int
	}{
		{"none", DefaultBrokerDefaults(), nil, 0},
		{"the broker's", broker, nil, 100},
		{"the namespace's", broker, Extra{ExtraMaxTopicsPerNamespace: []byte(`3`)}, 3},
		{"the namespace's 0 lifts the broker's", broker, Extra{ExtraMaxTopicsPerNamespace: []byte(`0`)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.d, TenantInfo{}, Policies{Extra: tc.ns}, nil).MaxTopicsPerNamespace; got != tc.want {
				t.Fatalf("MaxTopicsPerNamespace = %d, want %d", got, tc.want)
			}
		})
	}
	broker.MaxTopicsPerNamespace = -1
	if broker.Validate() == nil {
		t.Error("BrokerDefaults with a negative MaxTopicsPerNamespace validated")
	}
}
