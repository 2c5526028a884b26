/*
 * w7iox - the Eclipse iceoryx peer of W7 (w7.h), through its C
 * binding.  Started twice by w7bench (--peer iceoryx), never by hand; needs
 * a running iox-roudi (run.sh starts one with tests/bench/w7/roudi.toml).
 * Each process registers with RouDi (iox_runtime_init, a name unique per
 * run), then makes one publisher and one subscriber:
 *   producer  publishes on ("w7", tag, "to"), subscribes ("w7", tag, "back")
 *   consumer  the other way round
 * Publishers wait for a full subscriber (ConsumerTooSlowPolicy
 * WAIT_FOR_CONSUMER), subscribers ask for that (QueueFullPolicy
 * BLOCK_PRODUCER, queue of 256 chunks: iceoryx's maximum), so nothing is
 * dropped (the large run's producer keeps within w7.h's depth, which
 * bounds the chunks in flight below the queue's).  A message: iox_pub_loan_chunk, write it whole,
 * iox_pub_publish_chunk; iox_sub_take_chunk, read it whole,
 * iox_sub_release_chunk.  iceoryx has no bulk calls: batch 1 only.
 * Options: --role producer|consumer, --w7-fd N (the shared block), --tag T
 * (the run's instance name).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iceoryx_binding_c/enums.h>
#include <iceoryx_binding_c/publisher.h>
#include <iceoryx_binding_c/runtime.h>
#include <iceoryx_binding_c/subscriber.h>
#include <iceoryx_binding_c/types.h>

#include "tests/bench/w7/w7.h"

struct iox_ctx {
	iox_pub_t pub;
	iox_sub_t sub;
};

static struct w7_shared *sh;

static unsigned x_get(void *ctx, int s, void **m, unsigned n)
{
	struct iox_ctx *x = ctx;

	(void)n;
	return iox_pub_loan_chunk(x->pub, m, sh->size[s]) == AllocationResult_SUCCESS;
}

static unsigned x_send(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct iox_ctx *x = ctx;

	(void)s;
	(void)dir;
	(void)n;
	iox_pub_publish_chunk(x->pub, m[0]);    /* waits while the queue is full */
	return 1;
}

static unsigned x_recv(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct iox_ctx *x = ctx;

	(void)s;
	(void)dir;
	(void)n;
	return iox_sub_take_chunk(x->sub, (const void **)m) == ChunkReceiveResult_SUCCESS;
}

static void x_put(void *ctx, int s, void **m, unsigned n)
{
	struct iox_ctx *x = ctx;

	(void)s;
	(void)n;
	iox_sub_release_chunk(x->sub, m[0]);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "role", required_argument, NULL, 'r' }, { "w7-fd", required_argument, NULL, 'f' },
		{ "tag", required_argument, NULL, 't' }, { NULL, 0, NULL, 0 },
	};
	const char *tag = "w7";
	int producer = -1, fd = -1, c;
	iox_pub_storage_t ps;
	iox_sub_storage_t ss;
	iox_pub_options_t po;
	iox_sub_options_t so;
	struct iox_ctx x;
	struct w7_ops o = { x_get, x_send, x_recv, x_put, &x };
	char name[96];
	unsigned spins = 0;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'r')
			producer = strcmp(optarg, "producer") == 0;
		else if (c == 'f')
			fd = atoi(optarg);
		else if (c == 't')
			tag = optarg;
		else
			return 2;
	}
	if (producer < 0 || fd < 0 || (sh = w7_map_fd(fd)) == NULL) {
		fprintf(stderr, "w7iox: needs --role and --w7-fd (run by w7bench)\n");
		return 2;
	}
	snprintf(name, sizeof(name), "%s_%s", tag, producer ? "producer" : "consumer");
	iox_runtime_init(name);
	iox_pub_options_init(&po);
	po.historyCapacity = 0;
	po.subscriberTooSlowPolicy = ConsumerTooSlowPolicy_WAIT_FOR_CONSUMER;
	iox_sub_options_init(&so);
	so.queueCapacity = 256;
	so.queueFullPolicy = QueueFullPolicy_BLOCK_PRODUCER;
	x.pub = iox_pub_init(&ps, "w7", tag, producer ? "to" : "back", &po);
	x.sub = iox_sub_init(&ss, "w7", tag, producer ? "back" : "to", &so);
	/* Both directions connected before the first message (RouDi's
	 * discovery runs in its own loop). */
	while (iox_sub_get_subscription_state(x.sub) != SubscribeState_SUBSCRIBED ||
	       !iox_pub_has_subscribers(x.pub)) {
		if (atomic_load(&sh->failed))
			return 1;
		if (++spins > 30000) {
			errno = ETIMEDOUT;
			w7_fail(sh, "iceoryx: publisher and subscriber did not connect in 30 s");
		}
		usleep(1000);
	}
	if (producer)
		w7_producer(&o, sh);
	else
		w7_consumer(&o, sh);
	iox_sub_deinit(x.sub);
	iox_pub_deinit(x.pub);
	iox_runtime_shutdown();
	return 0;
}
