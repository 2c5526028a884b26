/*
 * test_daemon_malformed.c - sheafd's protocol against malformed frames,
 * with real processes: the test starts the sheafd built next to this
 * program (util_daemon.h) on a control socket in a fresh temporary
 * directory, with its log in DIR/log (printed when the test fails), sends it
 * bad frames on raw connections (framed protobuf, util_rpc.h) and keeps a
 * well-behaved client (a forked child that calls sheaf_connect itself)
 * working meanwhile.  test_daemon.c holds sheafd's other protocol and life
 * tests (the multi-process workloads are in test_daemon_stress.c, the
 * SIGKILLed clients in test_daemon_kill.c).
 *
 *   malformed      oversize, truncated, garbage, unknown-field, unknown-body,
 *                  empty and wrong-version frames on raw connections, while
 *                  a well-behaved client allocates and calls Stats the whole
 *                  time: each gets the documented treatment, the good client
 *                  never fails, the daemon lives and logs the reasons.
 *
 * Every test is one TCase (CK_RUN_CASE=<name> runs one).  Hot loops use
 * REQUIRE (Check's passing assertions are slow); child processes report
 * through pipes, REQUIRE and exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "proto/frame.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

/* ---- malformed frames ---------------------------------------------------- */

struct good_arg {
	const char *sock;
	int ready[2];
	int stop[2];
	int report[2];
};

static int good_client(void *argp)
{
	struct good_arg *a = argp;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	uint64_t iters = 0, stats = 0;

	close(a->stop[1]);
	pool = child_connect(a->sock, "good");
	c = sheaf_cache_create(pool, "mf", 128, NULL);
	REQUIRE(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write ready");
	for (;;) {
		struct pollfd pf = { a->stop[0], POLLIN, 0 };
		void *objs[64];
		struct sheaf_stats st;
		int rc;

		for (int k = 0; k < 64; k++) {
			objs[k] = sheaf_alloc(c);
			REQUIRE(objs[k] != NULL, "good client: sheaf_alloc: %s", strerror(errno));
			memset(objs[k], k, 128);
		}
		for (int k = 0; k < 64; k++) {
			REQUIRE(((unsigned char *)objs[k])[127] == k, "good client: object changed");
			rc = sheaf_free(c, objs[k]);
			REQUIRE(rc == 0, "good client: sheaf_free: %d", rc);
		}
		rc = sheaf_cache_stats(c, -1, &st);
		REQUIRE(rc == 0, "good client: sheaf_cache_stats after %llu calls: %d",
		     (unsigned long long)stats, rc);
		stats++;
		iters++;
		if (poll(&pf, 1, 0) != 0)
			break;
	}
	uint64_t rep[2] = { iters, stats };
	REQUIRE(write_full(a->report[1], rep, sizeof(rep)) == 0, "write report");
	sheaf_disconnect(pool);
	return 0;
}

/* A raw connection to @d, or a failure. */
static int must_connect(struct dmn *d)
{
	int fd = unix_connect(d->sock);

	REQUIRE(fd >= 0, "connect %s: %s", d->sock, strerror(-fd));
	return fd;
}

/* Expect one Response with @status on @fd; returns it (caller frees). */
static Sheaf__V1__Response *expect_status(int fd, int status, const char *what)
{
	int rc;
	Sheaf__V1__Response *r = recv_resp(fd, 20000, &rc);

	REQUIRE(r != NULL, "%s: no response: %s", what, strerror(-rc));
	REQUIRE((int)r->status == status, "%s: status %d (%s), expected %d", what, r->status,
		r->error, status);
	REQUIRE(status == SHEAF__V1__STATUS__STATUS_OK || (r->error != NULL && r->error[0]),
		"%s: an error response without a reason", what);
	return r;
}

/* The connection still works: DaemonInfo gets STATUS_OK with its id. */
static void expect_usable(int fd, uint64_t id, const char *what)
{
	int rc;
	Sheaf__V1__Response *r = rpc_info(fd, id, &rc);

	REQUIRE(r != NULL, "%s: DaemonInfo afterwards: %s", what, strerror(-rc));
	REQUIRE(r->status == SHEAF__V1__STATUS__STATUS_OK &&
		r->body_case == SHEAF__V1__RESPONSE__BODY_DAEMON_INFO && r->id == id,
		"%s: DaemonInfo afterwards: status %d, body %d, id %llu", what, r->status,
		r->body_case, (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
}

static void expect_closed(int fd, const char *what)
{
	size_t extra;

	REQUIRE(wait_closed(fd, 20000, &extra) == 1, "%s: the daemon kept the connection open", what);
	REQUIRE(extra == 0, "%s: %zu unexpected bytes before the close", what, extra);
}

static void malformed_round(struct dmn *d, int round)
{
	uint8_t buf[4096];
	size_t n;
	int fd;
	Sheaf__V1__Response *r;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__DaemonInfoRequest di = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	uint64_t id = (uint64_t)round * 100;

	/* (a) oversize length headers: the connection is closed. */
	fd = must_connect(d);
	REQUIRE(send_frame_hdr(fd, 0x7fffffffu, NULL, 0) == 0, "send");
	expect_closed(fd, "0x7fffffff-byte header");
	close(fd);
	fd = must_connect(d);
	memset(buf, 0, sizeof(buf));
	REQUIRE(send_frame_hdr(fd, FRAME_DEFAULT_CAP + 1, buf, 100) == 0, "send");
	expect_closed(fd, "cap+1-byte header");
	close(fd);

	/* (b) a truncated frame, then close: nothing breaks. */
	fd = must_connect(d);
	REQUIRE(send_frame_hdr(fd, 100, "\x08\x01\x82\x01\x00\x00\x00\x00\x00\x00", 10) == 0,
		"send");
	close(fd);
	fd = must_connect(d);
	REQUIRE(send_all(fd, "\x00\x00", 2) == 0, "send");   /* half a header */
	close(fd);

	/* (c) garbage as a payload: BAD_REQUEST, the connection stays usable. */
	fd = must_connect(d);
	static const uint8_t garbage[] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x07,
		'g', 'a', 'r', 'b', 'a', 'g', 'e',
	};
	REQUIRE(send_frame(fd, garbage, sizeof(garbage)) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "garbage payload");
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_usable(fd, id + 1, "after garbage");
	/* A field with an invalid wire type (7). */
	REQUIRE(send_frame(fd, "\x0f\x01", 2) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "invalid wire type");
	sheaf__v1__response__free_unpacked(r, NULL);
	/* An empty frame: no body. */
	REQUIRE(send_frame(fd, NULL, 0) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "empty frame");
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_usable(fd, id + 2, "after an empty frame");

	/* (d) a valid request plus an unknown field (tag 99, varint). */
	rq.id = id + 3;
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &di;
	n = pack_req(&rq, buf, sizeof(buf));
	buf[n++] = 0x98;        /* (99 << 3) | 0 */
	buf[n++] = 0x06;
	buf[n++] = 0x01;
	REQUIRE(send_frame(fd, buf, n) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unknown field 99");
	REQUIRE(r->id == id + 3, "unknown field 99: reply id %llu", (unsigned long long)r->id);
	REQUIRE(strstr(r->error, "99") != NULL, "unknown field 99: reason '%s'", r->error);
	sheaf__v1__response__free_unpacked(r, NULL);
	/* ... and inside the body: daemon_info { 99: 1 }. */
	{
		static const uint8_t nested[] = { 0x08, 0x05, 0x82, 0x01, 0x03, 0x98, 0x06, 0x01 };
		REQUIRE(send_frame(fd, nested, sizeof(nested)) == 0, "send");
		r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unknown field in body");
		REQUIRE(strstr(r->error, "99") != NULL, "unknown field in body: reason '%s'", r->error);
		sheaf__v1__response__free_unpacked(r, NULL);
	}
	expect_usable(fd, id + 4, "after unknown fields");

	/* (e) an unknown oneof case: tag 1000 (no range hands it out; 40 is
	 * QueueCreate now), length-delimited, empty. */
	{
		uint8_t m[] = { 0x08, (uint8_t)(id + 5), 0xc2, 0x3e, 0x00 };
		m[1] &= 0x7f;
		REQUIRE(send_frame(fd, m, sizeof(m)) == 0, "send");
		r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unknown body 1000");
		sheaf__v1__response__free_unpacked(r, NULL);
	}
	/* A request with an id and no body at all. */
	REQUIRE(send_frame(fd, "\x08\x07", 2) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "no body");
	REQUIRE(r->id == 7, "no body: reply id %llu", (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_usable(fd, id + 6, "after unknown bodies");
	/* A frame of exactly the cap is read (and refused as garbage). */
	{
		uint8_t *big = calloc(1, FRAME_DEFAULT_CAP);
		REQUIRE(big != NULL, "calloc");
		REQUIRE(send_frame(fd, big, FRAME_DEFAULT_CAP) == 0, "send");
		free(big);
		r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "frame of the cap");
		sheaf__v1__response__free_unpacked(r, NULL);
		expect_usable(fd, id + 7, "after a frame of the cap");
	}
	/* Several requests in one write are all answered, in order. */
	{
		size_t off = 0;
		for (int k = 0; k < 3; k++) {
			rq.id = id + 10 + (uint64_t)k;
			n = pack_req(&rq, buf + off + FRAME_HDR, sizeof(buf) - off - FRAME_HDR);
			frame_put_len(buf + off, (uint32_t)n);
			off += FRAME_HDR + n;
		}
		REQUIRE(send_all(fd, buf, off) == 0, "send");
		for (int k = 0; k < 3; k++) {
			r = expect_status(fd, SHEAF__V1__STATUS__STATUS_OK, "pipelined DaemonInfo");
			REQUIRE(r->id == id + 10 + (uint64_t)k, "pipelined reply %d has id %llu", k,
				(unsigned long long)r->id);
			sheaf__v1__response__free_unpacked(r, NULL);
		}
	}
	close(fd);

	/* (f) Attach speaking protocol version 3: UNSUPPORTED, then closed. */
	fd = must_connect(d);
	rq = (Sheaf__V1__Request)SHEAF__V1__REQUEST__INIT;
	rq.id = id + 20;
	ar.protocol_version = 3;
	ar.pid = (uint32_t)getpid();
	ar.name = (char *)"from-the-future";
	rq.body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq.attach = &ar;
	n = pack_req(&rq, buf, sizeof(buf));
	REQUIRE(send_frame(fd, buf, n) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_UNSUPPORTED, "Attach version 3");
	REQUIRE(r->id == id + 20, "Attach version 3: reply id %llu", (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_closed(fd, "after Attach version 3");
	close(fd);
}

START_TEST(malformed)
{
	static struct good_arg a;
	struct dmn d;
	pid_t good;
	uint64_t rep[2];
	int rounds = test_san() ? 5 : 20;
	int64_t t0;
	char g;
	static const char *const reasons[] = {
		"2147483647-byte frame", "1048577-byte frame", "unparsable request",
		"unknown field 99", "unknown field 1000", "no known body", "EOF mid-frame",
	};

	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0 && pipe(a.report) == 0, "pipe");
	good = fork_child(good_client, &a);
	REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "good client did not start");
	t0 = now_ms();
	for (int i = 0; i < rounds; i++) {
		malformed_round(&d, i);
		REQUIRE(dmn_alive(&d), "sheafd died in round %d", i);
	}
	printf("malformed: %d rounds of bad frames in %lld ms\n", rounds,
	       (long long)(now_ms() - t0));
	close(a.stop[1]);
	reap_ok(good, 60000, "good client");
	REQUIRE(read_full(a.report[0], rep, sizeof(rep), 1000) == 0, "no report from the good client");
	printf("  good client: %llu alloc/free rounds, %llu Stats calls, no failure\n",
	       (unsigned long long)rep[0], (unsigned long long)rep[1]);
	REQUIRE(rep[1] > 0, "the good client made no Stats call");
	REQUIRE(dmn_alive(&d), "sheafd died");
	for (unsigned i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		REQUIRE(file_contains(d.log, reasons[i]), "sheafd's log does not mention '%s'",
			reasons[i]);
	REQUIRE(file_contains(d.log, "protocol version 3"),
		"sheafd's log does not mention the refused Attach of protocol version 3");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("sheafd-malformed");

	require_binaries("test_daemon_malformed");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, malformed, 240);
	return run_suite(s);
}
