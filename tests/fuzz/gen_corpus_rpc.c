/*
 * gen_corpus_rpc.c - writes fuzz_rpc's seed corpus: one file per request
 * kind, each the bytes a client sends (4-byte length, packed Request; see
 * proto/frame.h), plus one "session" file with several frames in a row.
 * Usage: gen_corpus_rpc DIR (`make fuzz-corpus` writes tests/fuzz/corpus_rpc/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "proto/frame.h"
#include "proto/sheaf.pb-c.h"

static const char *outdir;

/* Append request @rq, framed, to @buf (@len bytes so far; room for 64 KiB). */
static size_t put_frame(uint8_t *buf, size_t len, const Sheaf__V1__Request *rq)
{
	size_t n = sheaf__v1__request__get_packed_size(rq);

	if (len + FRAME_HDR + n > 65536) {
		fprintf(stderr, "gen_corpus_rpc: request too large\n");
		exit(1);
	}
	frame_put_len(buf + len, (uint32_t)n);
	sheaf__v1__request__pack(rq, buf + len + FRAME_HDR);
	return len + FRAME_HDR + n;
}

static void write_file(const char *name, const uint8_t *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void one(const char *name, const Sheaf__V1__Request *rq)
{
	static uint8_t buf[65536];

	write_file(name, buf, put_frame(buf, 0, rq));
}

int main(int argc, char **argv)
{
	static uint8_t buf[65536];
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__AttachRequest at = SHEAF__V1__ATTACH_REQUEST__INIT;
	Sheaf__V1__CacheCreateRequest cc = SHEAF__V1__CACHE_CREATE_REQUEST__INIT;
	Sheaf__V1__CacheOpenRequest co = SHEAF__V1__CACHE_OPEN_REQUEST__INIT;
	Sheaf__V1__CacheListRequest cl = SHEAF__V1__CACHE_LIST_REQUEST__INIT;
	Sheaf__V1__CacheDestroyRequest cd = SHEAF__V1__CACHE_DESTROY_REQUEST__INIT;
	Sheaf__V1__StatsRequest st = SHEAF__V1__STATS_REQUEST__INIT;
	Sheaf__V1__DaemonInfoRequest di = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	Sheaf__V1__CheckRequest ck = SHEAF__V1__CHECK_REQUEST__INIT;
	Sheaf__V1__ShrinkRequest sh = SHEAF__V1__SHRINK_REQUEST__INIT;
	Sheaf__V1__TuneRequest tu = SHEAF__V1__TUNE_REQUEST__INIT;
	Sheaf__V1__ClientsRequest cs = SHEAF__V1__CLIENTS_REQUEST__INIT;
	Sheaf__V1__NameSetRequest ns = SHEAF__V1__NAME_SET_REQUEST__INIT;
	Sheaf__V1__NameDelRequest nd = SHEAF__V1__NAME_DEL_REQUEST__INIT;
	Sheaf__V1__NameListRequest nl = SHEAF__V1__NAME_LIST_REQUEST__INIT;
	Sheaf__V1__QueueCreateRequest qc = SHEAF__V1__QUEUE_CREATE_REQUEST__INIT;
	Sheaf__V1__QueueDestroyRequest qd = SHEAF__V1__QUEUE_DESTROY_REQUEST__INIT;
	Sheaf__V1__QueueListRequest ql = SHEAF__V1__QUEUE_LIST_REQUEST__INIT;
	Sheaf__V1__Setting set[3] = {
		SHEAF__V1__SETTING__INIT, SHEAF__V1__SETTING__INIT, SHEAF__V1__SETTING__INIT,
	};
	Sheaf__V1__Setting *setp[3] = { &set[0], &set[1], &set[2] };
	size_t len = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus_rpc DIR\n");
		return 2;
	}
	outdir = argv[1];

	rq.id = 1;
	at.protocol_version = SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	at.name = "fuzz";
	rq.body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq.attach = &at;
	one("attach", &rq);
	len = put_frame(buf, len, &rq);
	at.resume = 1;
	at.client_id = 1;
	rq.id = 2;
	one("attach_resume", &rq);

	rq.id = 3;
	cc.name = "fuzz-cache";
	cc.size = 64;
	cc.align = 8;
	cc.capacity = -1;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_CREATE;
	rq.cache_create = &cc;
	one("cache_create", &rq);
	len = put_frame(buf, len, &rq);
	cc.name = "fuzz-debug";
	cc.size = 1000;
	cc.align = 64;
	cc.capacity = 4;
	cc.flags = 1;
	rq.id = 4;
	one("cache_create_debug", &rq);

	rq.id = 5;
	co.name = "fuzz-cache";
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_OPEN;
	rq.cache_open = &co;
	one("cache_open", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 6;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_LIST;
	rq.cache_list = &cl;
	one("cache_list", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 7;
	st.cache = "fuzz-cache";
	rq.body_case = SHEAF__V1__REQUEST__BODY_STATS;
	rq.stats = &st;
	one("stats_cache", &rq);
	len = put_frame(buf, len, &rq);
	st.cache = "";
	rq.id = 8;
	one("stats", &rq);

	rq.id = 9;
	tu.cache = "fuzz-cache";
	set[0].key = "barn_low";
	set[0].value = 1;
	set[1].key = "barn_high";
	set[1].value = 4;
	set[2].key = "sheaf_capacity";
	set[2].value = 16;
	tu.n_settings = 3;
	tu.settings = setp;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TUNE;
	rq.tune = &tu;
	one("tune_cache", &rq);
	len = put_frame(buf, len, &rq);
	tu.cache = "";
	set[0].key = "mem_cap";
	set[0].value = 4u << 20;
	tu.n_settings = 1;
	rq.id = 10;
	one("tune_pool", &rq);

	rq.id = 11;
	sh.cache = "fuzz-cache";
	rq.body_case = SHEAF__V1__REQUEST__BODY_SHRINK;
	rq.shrink = &sh;
	one("shrink_cache", &rq);
	len = put_frame(buf, len, &rq);
	sh.cache = "";
	rq.id = 12;
	one("shrink", &rq);

	rq.id = 13;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CLIENTS;
	rq.clients = &cs;
	one("clients", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 14;
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &di;
	one("daemon_info", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 15;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK;
	rq.check = &ck;
	one("check", &rq);
	len = put_frame(buf, len, &rq);

	/* An owned cache (flags 2: SHEAF_CACHE_OWNED), then names and
	 * queues: each request alone, and in the session. */
	rq.id = 17;
	cc.name = "fuzz-owned";
	cc.size = 128;
	cc.align = 16;
	cc.capacity = 8;
	cc.flags = 2;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_CREATE;
	rq.cache_create = &cc;
	one("cache_create_owned", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 18;
	ns.name = "fuzz-name";
	ns.offset = 4u << 20;        /* not an object's: refused, as most are */
	rq.body_case = SHEAF__V1__REQUEST__BODY_NAME_SET;
	rq.name_set = &ns;
	one("name_set", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 19;
	rq.body_case = SHEAF__V1__REQUEST__BODY_NAME_LIST;
	rq.name_list = &nl;
	one("name_list", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 20;
	nd.name = "fuzz-name";
	rq.body_case = SHEAF__V1__REQUEST__BODY_NAME_DEL;
	rq.name_del = &nd;
	one("name_del", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 21;
	qc.name = "fuzz-queue";
	qc.capacity = 64;
	rq.body_case = SHEAF__V1__REQUEST__BODY_QUEUE_CREATE;
	rq.queue_create = &qc;
	one("queue_create", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 22;
	rq.body_case = SHEAF__V1__REQUEST__BODY_QUEUE_LIST;
	rq.queue_list = &ql;
	one("queue_list", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 23;
	st.cache = "";               /* every cache, and every queue */
	rq.body_case = SHEAF__V1__REQUEST__BODY_STATS;
	rq.stats = &st;
	len = put_frame(buf, len, &rq);

	rq.id = 24;
	qd.name = "fuzz-queue";
	rq.body_case = SHEAF__V1__REQUEST__BODY_QUEUE_DESTROY;
	rq.queue_destroy = &qd;
	one("queue_destroy", &rq);
	len = put_frame(buf, len, &rq);

	rq.id = 16;
	cd.name = "fuzz-cache";
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_DESTROY;
	rq.cache_destroy = &cd;
	one("cache_destroy", &rq);
	len = put_frame(buf, len, &rq);

	/* Attach, create, open, list, stats, tune, shrink, clients, info,
	 * check, an owned cache, names, queues, destroy: one connection's
	 * whole life. */
	write_file("session", buf, len);
	return 0;
}
