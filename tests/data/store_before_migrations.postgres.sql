--
-- PostgreSQL database dump
--

\restrict voUGZMDeRFHAl4uwn6k5nuvydm5bXHQF1xjja42GIIslXR4LKrbqFdKjQVrP7Fi

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: checkpoint; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.checkpoint (
    id integer NOT NULL,
    job_id integer NOT NULL,
    step integer NOT NULL,
    path text NOT NULL,
    metrics json NOT NULL,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: checkpoint_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.checkpoint_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: checkpoint_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.checkpoint_id_seq OWNED BY public.checkpoint.id;


--
-- Name: comparison; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.comparison (
    id integer NOT NULL,
    name character varying(200) NOT NULL,
    config json NOT NULL,
    a_ref text NOT NULL,
    b_ref text NOT NULL,
    eval_runs json NOT NULL,
    summary json NOT NULL,
    status character varying(16) NOT NULL,
    error text NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone
);


--
-- Name: comparison_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.comparison_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: comparison_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.comparison_id_seq OWNED BY public.comparison.id;


--
-- Name: comparison_pair; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.comparison_pair (
    id integer NOT NULL,
    comparison_id integer NOT NULL,
    persona_id character varying(200) NOT NULL,
    seed integer NOT NULL,
    a_dialogue_id integer NOT NULL,
    b_dialogue_id integer NOT NULL
);


--
-- Name: comparison_pair_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.comparison_pair_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: comparison_pair_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.comparison_pair_id_seq OWNED BY public.comparison_pair.id;


--
-- Name: dialogue; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dialogue (
    id integer NOT NULL,
    persona_id character varying(64),
    persona_snapshot json NOT NULL,
    source character varying(16) NOT NULL,
    collection character varying(200) NOT NULL,
    external_id character varying(128) NOT NULL,
    policy_ref text NOT NULL,
    mode character varying(8) NOT NULL,
    simulator_fingerprint json NOT NULL,
    fingerprint_hash character varying(64) NOT NULL,
    job_id integer,
    step integer,
    group_id character varying(64) NOT NULL,
    eval_run_id integer,
    status character varying(16) NOT NULL,
    final_emotion double precision,
    outcome character varying(16) NOT NULL,
    error text NOT NULL,
    n_turns integer NOT NULL,
    seed integer NOT NULL,
    config json NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone
);


--
-- Name: dialogue_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.dialogue_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: dialogue_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.dialogue_id_seq OWNED BY public.dialogue.id;


--
-- Name: eval_run; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.eval_run (
    id integer NOT NULL,
    job_id integer,
    name character varying(200) NOT NULL,
    model_ref text NOT NULL,
    simulator_fingerprint json NOT NULL,
    fingerprint_hash character varying(64) NOT NULL,
    profile_set_hash character varying(64) NOT NULL,
    protocol json NOT NULL,
    config json NOT NULL,
    status character varying(16) NOT NULL,
    score double precision,
    success integer,
    failure integer,
    n integer NOT NULL,
    n_errors integer NOT NULL,
    ci_low double precision,
    ci_high double precision,
    seed integer NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone
);


--
-- Name: eval_run_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.eval_run_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: eval_run_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.eval_run_id_seq OWNED BY public.eval_run.id;


--
-- Name: experiment; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.experiment (
    id integer NOT NULL,
    name character varying(200) NOT NULL,
    base json NOT NULL,
    grid json NOT NULL,
    benchmark json NOT NULL,
    judge json NOT NULL,
    parallel integer NOT NULL,
    source text NOT NULL,
    status character varying(16) NOT NULL,
    runner_pid integer,
    error text NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone
);


--
-- Name: experiment_cell; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.experiment_cell (
    id integer NOT NULL,
    experiment_id integer NOT NULL,
    index integer NOT NULL,
    params json NOT NULL,
    config json NOT NULL,
    status character varying(16) NOT NULL,
    train_job_id integer,
    benchmark_job_id integer,
    eval_run_id integer,
    error text NOT NULL
);


--
-- Name: experiment_cell_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.experiment_cell_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: experiment_cell_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.experiment_cell_id_seq OWNED BY public.experiment_cell.id;


--
-- Name: experiment_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.experiment_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: experiment_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.experiment_id_seq OWNED BY public.experiment.id;


--
-- Name: job; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job (
    id integer NOT NULL,
    kind character varying(16) NOT NULL,
    name character varying(200) NOT NULL,
    config json NOT NULL,
    status character varying(16) NOT NULL,
    pid integer,
    heartbeat_at timestamp without time zone,
    progress double precision NOT NULL,
    step integer NOT NULL,
    total_steps integer NOT NULL,
    log_path text NOT NULL,
    output_dir text NOT NULL,
    error text NOT NULL,
    seed integer NOT NULL,
    code_version character varying(64) NOT NULL,
    parent_id integer,
    created_at timestamp without time zone NOT NULL,
    started_at timestamp without time zone,
    finished_at timestamp without time zone
);


--
-- Name: job_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.job_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: job_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.job_id_seq OWNED BY public.job.id;


--
-- Name: judge_score; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.judge_score (
    id integer NOT NULL,
    dialogue_id integer NOT NULL,
    eval_run_id integer,
    judge_fingerprint json NOT NULL,
    judge_hash character varying(64) NOT NULL,
    status character varying(16) NOT NULL,
    error_kind character varying(16) NOT NULL,
    error text NOT NULL,
    scores json NOT NULL,
    reasons json NOT NULL,
    mean double precision,
    raw text NOT NULL,
    attempts integer NOT NULL,
    latency_s double precision NOT NULL,
    n_tokens integer NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: judge_score_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.judge_score_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: judge_score_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.judge_score_id_seq OWNED BY public.judge_score.id;


--
-- Name: metric; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.metric (
    id integer NOT NULL,
    job_id integer NOT NULL,
    step integer NOT NULL,
    name character varying(64) NOT NULL,
    value double precision NOT NULL,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: metric_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.metric_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: metric_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.metric_id_seq OWNED BY public.metric.id;


--
-- Name: persona; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.persona (
    id character varying(64) NOT NULL,
    name character varying(200) NOT NULL,
    language character varying(8) NOT NULL,
    persona text NOT NULL,
    background text NOT NULL,
    explicit_goal text NOT NULL,
    hidden_need text NOT NULL,
    need_category character varying(32) NOT NULL,
    personality character varying(16) NOT NULL,
    traits json NOT NULL,
    first_line text NOT NULL,
    difficulty character varying(16) NOT NULL,
    source character varying(32) NOT NULL,
    extra json NOT NULL,
    created_at timestamp without time zone NOT NULL,
    updated_at timestamp without time zone NOT NULL
);


--
-- Name: persona_candidate; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.persona_candidate (
    id integer NOT NULL,
    generation_id integer NOT NULL,
    slot integer NOT NULL,
    plan json NOT NULL,
    profile json NOT NULL,
    status character varying(16) NOT NULL,
    validation_error text NOT NULL,
    lint_warnings integer NOT NULL,
    lint json NOT NULL,
    similarity double precision,
    nearest_id character varying(64) NOT NULL,
    persona_id character varying(64) NOT NULL,
    raw text NOT NULL,
    attempts integer NOT NULL,
    regenerated integer NOT NULL,
    latency_s double precision NOT NULL,
    n_tokens integer NOT NULL,
    created_at timestamp without time zone NOT NULL,
    updated_at timestamp without time zone NOT NULL
);


--
-- Name: persona_candidate_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.persona_candidate_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: persona_candidate_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.persona_candidate_id_seq OWNED BY public.persona_candidate.id;


--
-- Name: persona_generation; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.persona_generation (
    id integer NOT NULL,
    endpoint character varying(200) NOT NULL,
    model character varying(200) NOT NULL,
    prompt_version character varying(32) NOT NULL,
    prompt_sha256 character varying(64) NOT NULL,
    spec json NOT NULL,
    settings json NOT NULL,
    status character varying(16) NOT NULL,
    n_planned integer NOT NULL,
    n_done integer NOT NULL,
    error text NOT NULL,
    seed integer NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone
);


--
-- Name: persona_generation_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.persona_generation_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: persona_generation_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.persona_generation_id_seq OWNED BY public.persona_generation.id;


--
-- Name: persona_set; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.persona_set (
    id integer NOT NULL,
    name character varying(200) NOT NULL,
    content_hash character varying(64) NOT NULL,
    source_kind character varying(16) NOT NULL,
    params json NOT NULL,
    code_version character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: persona_set_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.persona_set_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: persona_set_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.persona_set_id_seq OWNED BY public.persona_set.id;


--
-- Name: persona_set_member; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.persona_set_member (
    id integer NOT NULL,
    set_id integer NOT NULL,
    "position" integer NOT NULL,
    persona_id character varying(64) NOT NULL
);


--
-- Name: persona_set_member_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.persona_set_member_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: persona_set_member_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.persona_set_member_id_seq OWNED BY public.persona_set_member.id;


--
-- Name: store_meta; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.store_meta (
    key character varying(64) NOT NULL,
    value text NOT NULL
);


--
-- Name: turn; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.turn (
    id integer NOT NULL,
    dialogue_id integer NOT NULL,
    index integer NOT NULL,
    role character varying(16) NOT NULL,
    text text NOT NULL,
    think_text text NOT NULL,
    emotion double precision,
    delta double precision,
    "inner" json NOT NULL,
    n_tokens integer NOT NULL,
    latency_s double precision NOT NULL,
    error text NOT NULL,
    policy_version integer,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: turn_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.turn_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: turn_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.turn_id_seq OWNED BY public.turn.id;


--
-- Name: checkpoint id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.checkpoint ALTER COLUMN id SET DEFAULT nextval('public.checkpoint_id_seq'::regclass);


--
-- Name: comparison id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison ALTER COLUMN id SET DEFAULT nextval('public.comparison_id_seq'::regclass);


--
-- Name: comparison_pair id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison_pair ALTER COLUMN id SET DEFAULT nextval('public.comparison_pair_id_seq'::regclass);


--
-- Name: dialogue id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dialogue ALTER COLUMN id SET DEFAULT nextval('public.dialogue_id_seq'::regclass);


--
-- Name: eval_run id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.eval_run ALTER COLUMN id SET DEFAULT nextval('public.eval_run_id_seq'::regclass);


--
-- Name: experiment id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment ALTER COLUMN id SET DEFAULT nextval('public.experiment_id_seq'::regclass);


--
-- Name: experiment_cell id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell ALTER COLUMN id SET DEFAULT nextval('public.experiment_cell_id_seq'::regclass);


--
-- Name: job id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job ALTER COLUMN id SET DEFAULT nextval('public.job_id_seq'::regclass);


--
-- Name: judge_score id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.judge_score ALTER COLUMN id SET DEFAULT nextval('public.judge_score_id_seq'::regclass);


--
-- Name: metric id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metric ALTER COLUMN id SET DEFAULT nextval('public.metric_id_seq'::regclass);


--
-- Name: persona_candidate id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_candidate ALTER COLUMN id SET DEFAULT nextval('public.persona_candidate_id_seq'::regclass);


--
-- Name: persona_generation id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_generation ALTER COLUMN id SET DEFAULT nextval('public.persona_generation_id_seq'::regclass);


--
-- Name: persona_set id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set ALTER COLUMN id SET DEFAULT nextval('public.persona_set_id_seq'::regclass);


--
-- Name: persona_set_member id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set_member ALTER COLUMN id SET DEFAULT nextval('public.persona_set_member_id_seq'::regclass);


--
-- Name: turn id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turn ALTER COLUMN id SET DEFAULT nextval('public.turn_id_seq'::regclass);


--
-- Data for Name: checkpoint; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.checkpoint VALUES (1, 1, 2, '/runs/1/step-2', '{"reward": 0.5}', '2026-11-25 12:00:00');


--
-- Data for Name: comparison; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.comparison VALUES (1, 'a vs b', '{}', 'default', '/runs/1/step-2', '{"a": [1], "b": [1]}', '{}', 'succeeded', '', '', '2026-11-25 12:00:00', NULL);


--
-- Data for Name: comparison_pair; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.comparison_pair VALUES (1, 1, 'maya', 0, 1, 2);


--
-- Data for Name: dialogue; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.dialogue VALUES (1, 'maya', '{"id": "maya"}', 'benchmark', '', '', 'default', 'direct', '{}', 'ffffffffffffffff', 1, 2, '', 1, 'finished', 55, 'max_turns', '', 2, 0, '{}', '', '2026-11-25 12:00:00', NULL);
INSERT INTO public.dialogue VALUES (2, 'tom-ü', '{"id": "tom-\u00fc"}', 'benchmark', '', '', 'default', 'direct', '{}', 'ffffffffffffffff', 1, 2, '', 1, 'finished', 68, 'max_turns', '', 2, 1, '{}', '', '2026-11-25 12:00:00', NULL);


--
-- Data for Name: eval_run; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.eval_run VALUES (1, 1, 'heldout', 'default', '{"backend": "offline"}', 'ffffffffffffffff', '', '{}', '{}', 'finished', 61.5, 1, 0, 2, 0, 40, 80, 0, '', '2026-11-25 12:00:00', '2026-11-25 12:00:00');


--
-- Data for Name: experiment; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.experiment VALUES (1, 'lr grid', '{}', '{"lr": [1e-05, 2e-05]}', '{}', '{}', 1, '', 'succeeded', NULL, '', '', '2026-11-25 12:00:00', NULL);


--
-- Data for Name: experiment_cell; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.experiment_cell VALUES (1, 1, 0, '{"lr": 1e-05}', '{}', 'succeeded', 1, NULL, 1, '');


--
-- Data for Name: job; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.job VALUES (1, 'train', 'grpo demo', '{"algorithm": "grpo", "lr": 1e-05}', 'succeeded', NULL, NULL, 1, 2, 2, '', '', '', 7, 'd29f43a', NULL, '2026-11-25 12:00:00', NULL, NULL);


--
-- Data for Name: judge_score; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.judge_score VALUES (1, 1, 1, '{}', 'jjjjjjjjjjjjjjjj', 'ok', '', '', '{"empathy": 4}', '{"empathy": "named the feeling"}', 4, '', 1, 0, 0, '', '2026-11-25 12:00:00');


--
-- Data for Name: metric; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.metric VALUES (1, 1, 1, 'reward', 0.25, '2026-11-25 12:00:00');
INSERT INTO public.metric VALUES (2, 1, 2, 'reward', 0.5, '2026-11-25 12:00:00');
INSERT INTO public.metric VALUES (3, 1, 2, 'kl', 0.012, '2026-11-25 12:00:00');


--
-- Data for Name: persona; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.persona VALUES ('maya', 'Maya', 'en', 'Maya, a nurse', '', '', '', '', '', '["proud", "tired"]', '', 'standard', 'user', '{"events": ["e1", "e2"]}', '2026-11-25 12:00:00', '2026-11-25 12:00:00');
INSERT INTO public.persona VALUES ('tom-ü', 'Tomás ü', 'en', 'Tomás ü, a nurse', '', '', '', '', '', '["proud", "tired"]', '', 'standard', 'user', '{"events": ["e1", "e2"]}', '2026-11-25 12:00:00', '2026-11-25 12:00:00');


--
-- Data for Name: persona_candidate; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.persona_candidate VALUES (1, 1, 0, '{}', '{"id": "cand"}', 'accepted', '', 0, '[]', 0.42, '', 'maya', '', 0, 0, 0, 0, '2026-11-25 12:00:00', '2026-11-25 12:00:00');


--
-- Data for Name: persona_generation; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.persona_generation VALUES (1, '127.0.0.1:8000', 'm', '', '', '{}', '{}', 'finished', 1, 1, '', 0, '', '2026-11-25 12:00:00', '2026-11-25 12:00:00');


--
-- Data for Name: persona_set; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.persona_set VALUES (1, 'pair', 'cccccccccccccccc', 'manual', '{}', '', '2026-11-25 12:00:00');


--
-- Data for Name: persona_set_member; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.persona_set_member VALUES (1, 1, 0, 'maya');
INSERT INTO public.persona_set_member VALUES (2, 1, 1, 'tom-ü');


--
-- Data for Name: store_meta; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.store_meta VALUES ('store_id', 'd931c75f502b');


--
-- Data for Name: turn; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.turn VALUES (1, 1, 0, 'user', 'Hi. Rough day.', '', 40, 0, '{"analysis": "tired"}', 0, 0, '', NULL, '2026-11-25 12:00:00');
INSERT INTO public.turn VALUES (2, 1, 1, 'assistant', 'That sounds hard — what happened?', '', NULL, NULL, '{}', 9, 0.25, '', 1, '2026-11-25 12:00:00');
INSERT INTO public.turn VALUES (3, 1, 2, 'user', '我被跳过了。', '', 48, 8, '{}', 0, 0, '', NULL, '2026-11-25 12:00:00');
INSERT INTO public.turn VALUES (4, 2, 0, 'user', 'Hi. Rough day.', '', 40, 0, '{"analysis": "tired"}', 0, 0, '', NULL, '2026-11-25 12:00:00');
INSERT INTO public.turn VALUES (5, 2, 1, 'assistant', 'That sounds hard — what happened?', '', NULL, NULL, '{}', 9, 0.25, '', 1, '2026-11-25 12:00:00');
INSERT INTO public.turn VALUES (6, 2, 2, 'user', '我被跳过了。', '', 48, 8, '{}', 0, 0, '', NULL, '2026-11-25 12:00:00');


--
-- Name: checkpoint_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.checkpoint_id_seq', 1, true);


--
-- Name: comparison_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.comparison_id_seq', 1, true);


--
-- Name: comparison_pair_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.comparison_pair_id_seq', 1, true);


--
-- Name: dialogue_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.dialogue_id_seq', 2, true);


--
-- Name: eval_run_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.eval_run_id_seq', 1, true);


--
-- Name: experiment_cell_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.experiment_cell_id_seq', 1, true);


--
-- Name: experiment_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.experiment_id_seq', 1, true);


--
-- Name: job_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.job_id_seq', 1, true);


--
-- Name: judge_score_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.judge_score_id_seq', 1, true);


--
-- Name: metric_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.metric_id_seq', 3, true);


--
-- Name: persona_candidate_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.persona_candidate_id_seq', 1, true);


--
-- Name: persona_generation_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.persona_generation_id_seq', 1, true);


--
-- Name: persona_set_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.persona_set_id_seq', 1, true);


--
-- Name: persona_set_member_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.persona_set_member_id_seq', 2, true);


--
-- Name: turn_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.turn_id_seq', 6, true);


--
-- Name: checkpoint checkpoint_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.checkpoint
    ADD CONSTRAINT checkpoint_pkey PRIMARY KEY (id);


--
-- Name: comparison_pair comparison_pair_comparison_id_persona_id_seed_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison_pair
    ADD CONSTRAINT comparison_pair_comparison_id_persona_id_seed_key UNIQUE (comparison_id, persona_id, seed);


--
-- Name: comparison_pair comparison_pair_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison_pair
    ADD CONSTRAINT comparison_pair_pkey PRIMARY KEY (id);


--
-- Name: comparison comparison_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison
    ADD CONSTRAINT comparison_pkey PRIMARY KEY (id);


--
-- Name: dialogue dialogue_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dialogue
    ADD CONSTRAINT dialogue_pkey PRIMARY KEY (id);


--
-- Name: eval_run eval_run_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.eval_run
    ADD CONSTRAINT eval_run_pkey PRIMARY KEY (id);


--
-- Name: experiment_cell experiment_cell_experiment_id_index_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell
    ADD CONSTRAINT experiment_cell_experiment_id_index_key UNIQUE (experiment_id, index);


--
-- Name: experiment_cell experiment_cell_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell
    ADD CONSTRAINT experiment_cell_pkey PRIMARY KEY (id);


--
-- Name: experiment experiment_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment
    ADD CONSTRAINT experiment_pkey PRIMARY KEY (id);


--
-- Name: job job_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job
    ADD CONSTRAINT job_pkey PRIMARY KEY (id);


--
-- Name: judge_score judge_score_dialogue_id_judge_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.judge_score
    ADD CONSTRAINT judge_score_dialogue_id_judge_hash_key UNIQUE (dialogue_id, judge_hash);


--
-- Name: judge_score judge_score_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.judge_score
    ADD CONSTRAINT judge_score_pkey PRIMARY KEY (id);


--
-- Name: metric metric_job_id_step_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metric
    ADD CONSTRAINT metric_job_id_step_name_key UNIQUE (job_id, step, name);


--
-- Name: metric metric_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metric
    ADD CONSTRAINT metric_pkey PRIMARY KEY (id);


--
-- Name: persona_candidate persona_candidate_generation_id_slot_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_candidate
    ADD CONSTRAINT persona_candidate_generation_id_slot_key UNIQUE (generation_id, slot);


--
-- Name: persona_candidate persona_candidate_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_candidate
    ADD CONSTRAINT persona_candidate_pkey PRIMARY KEY (id);


--
-- Name: persona_generation persona_generation_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_generation
    ADD CONSTRAINT persona_generation_pkey PRIMARY KEY (id);


--
-- Name: persona persona_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona
    ADD CONSTRAINT persona_pkey PRIMARY KEY (id);


--
-- Name: persona_set_member persona_set_member_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set_member
    ADD CONSTRAINT persona_set_member_pkey PRIMARY KEY (id);


--
-- Name: persona_set_member persona_set_member_set_id_persona_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set_member
    ADD CONSTRAINT persona_set_member_set_id_persona_id_key UNIQUE (set_id, persona_id);


--
-- Name: persona_set_member persona_set_member_set_id_position_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set_member
    ADD CONSTRAINT persona_set_member_set_id_position_key UNIQUE (set_id, "position");


--
-- Name: persona_set persona_set_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set
    ADD CONSTRAINT persona_set_name_key UNIQUE (name);


--
-- Name: persona_set persona_set_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set
    ADD CONSTRAINT persona_set_pkey PRIMARY KEY (id);


--
-- Name: store_meta store_meta_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.store_meta
    ADD CONSTRAINT store_meta_pkey PRIMARY KEY (key);


--
-- Name: turn turn_dialogue_id_index_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_dialogue_id_index_key UNIQUE (dialogue_id, index);


--
-- Name: turn turn_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_pkey PRIMARY KEY (id);


--
-- Name: ix_checkpoint_job_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_checkpoint_job_id ON public.checkpoint USING btree (job_id);


--
-- Name: ix_comparison_pair_comparison_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_comparison_pair_comparison_id ON public.comparison_pair USING btree (comparison_id);


--
-- Name: ix_dialogue_collection; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_dialogue_collection ON public.dialogue USING btree (collection);


--
-- Name: ix_dialogue_eval_run_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_dialogue_eval_run_id ON public.dialogue USING btree (eval_run_id);


--
-- Name: ix_dialogue_fingerprint_hash; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_dialogue_fingerprint_hash ON public.dialogue USING btree (fingerprint_hash);


--
-- Name: ix_dialogue_job_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_dialogue_job_id ON public.dialogue USING btree (job_id);


--
-- Name: ix_dialogue_persona_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_dialogue_persona_id ON public.dialogue USING btree (persona_id);


--
-- Name: ix_eval_run_fingerprint_hash; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_eval_run_fingerprint_hash ON public.eval_run USING btree (fingerprint_hash);


--
-- Name: ix_experiment_cell_benchmark_job_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_experiment_cell_benchmark_job_id ON public.experiment_cell USING btree (benchmark_job_id);


--
-- Name: ix_experiment_cell_experiment_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_experiment_cell_experiment_id ON public.experiment_cell USING btree (experiment_id);


--
-- Name: ix_experiment_cell_train_job_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_experiment_cell_train_job_id ON public.experiment_cell USING btree (train_job_id);


--
-- Name: ix_experiment_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_experiment_status ON public.experiment USING btree (status);


--
-- Name: ix_job_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_job_status ON public.job USING btree (status);


--
-- Name: ix_judge_score_dialogue_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_judge_score_dialogue_id ON public.judge_score USING btree (dialogue_id);


--
-- Name: ix_judge_score_eval_run_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_judge_score_eval_run_id ON public.judge_score USING btree (eval_run_id);


--
-- Name: ix_judge_score_judge_hash; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_judge_score_judge_hash ON public.judge_score USING btree (judge_hash);


--
-- Name: ix_metric_job_name; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_metric_job_name ON public.metric USING btree (job_id, name);


--
-- Name: ix_persona_candidate_generation_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_persona_candidate_generation_id ON public.persona_candidate USING btree (generation_id);


--
-- Name: ix_persona_candidate_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_persona_candidate_status ON public.persona_candidate USING btree (status);


--
-- Name: ix_persona_set_member_set_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_persona_set_member_set_id ON public.persona_set_member USING btree (set_id);


--
-- Name: ix_turn_dialogue_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_turn_dialogue_id ON public.turn USING btree (dialogue_id);


--
-- Name: checkpoint checkpoint_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.checkpoint
    ADD CONSTRAINT checkpoint_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.job(id) ON DELETE CASCADE;


--
-- Name: comparison_pair comparison_pair_a_dialogue_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison_pair
    ADD CONSTRAINT comparison_pair_a_dialogue_id_fkey FOREIGN KEY (a_dialogue_id) REFERENCES public.dialogue(id);


--
-- Name: comparison_pair comparison_pair_b_dialogue_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison_pair
    ADD CONSTRAINT comparison_pair_b_dialogue_id_fkey FOREIGN KEY (b_dialogue_id) REFERENCES public.dialogue(id);


--
-- Name: comparison_pair comparison_pair_comparison_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.comparison_pair
    ADD CONSTRAINT comparison_pair_comparison_id_fkey FOREIGN KEY (comparison_id) REFERENCES public.comparison(id) ON DELETE CASCADE;


--
-- Name: dialogue dialogue_eval_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dialogue
    ADD CONSTRAINT dialogue_eval_run_id_fkey FOREIGN KEY (eval_run_id) REFERENCES public.eval_run(id);


--
-- Name: dialogue dialogue_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dialogue
    ADD CONSTRAINT dialogue_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.job(id);


--
-- Name: eval_run eval_run_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.eval_run
    ADD CONSTRAINT eval_run_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.job(id);


--
-- Name: experiment_cell experiment_cell_benchmark_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell
    ADD CONSTRAINT experiment_cell_benchmark_job_id_fkey FOREIGN KEY (benchmark_job_id) REFERENCES public.job(id);


--
-- Name: experiment_cell experiment_cell_eval_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell
    ADD CONSTRAINT experiment_cell_eval_run_id_fkey FOREIGN KEY (eval_run_id) REFERENCES public.eval_run(id);


--
-- Name: experiment_cell experiment_cell_experiment_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell
    ADD CONSTRAINT experiment_cell_experiment_id_fkey FOREIGN KEY (experiment_id) REFERENCES public.experiment(id) ON DELETE CASCADE;


--
-- Name: experiment_cell experiment_cell_train_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experiment_cell
    ADD CONSTRAINT experiment_cell_train_job_id_fkey FOREIGN KEY (train_job_id) REFERENCES public.job(id);


--
-- Name: job job_parent_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job
    ADD CONSTRAINT job_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES public.job(id);


--
-- Name: judge_score judge_score_dialogue_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.judge_score
    ADD CONSTRAINT judge_score_dialogue_id_fkey FOREIGN KEY (dialogue_id) REFERENCES public.dialogue(id) ON DELETE CASCADE;


--
-- Name: judge_score judge_score_eval_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.judge_score
    ADD CONSTRAINT judge_score_eval_run_id_fkey FOREIGN KEY (eval_run_id) REFERENCES public.eval_run(id);


--
-- Name: metric metric_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metric
    ADD CONSTRAINT metric_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.job(id) ON DELETE CASCADE;


--
-- Name: persona_candidate persona_candidate_generation_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_candidate
    ADD CONSTRAINT persona_candidate_generation_id_fkey FOREIGN KEY (generation_id) REFERENCES public.persona_generation(id) ON DELETE CASCADE;


--
-- Name: persona_set_member persona_set_member_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.persona_set_member
    ADD CONSTRAINT persona_set_member_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.persona_set(id) ON DELETE CASCADE;


--
-- Name: turn turn_dialogue_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_dialogue_id_fkey FOREIGN KEY (dialogue_id) REFERENCES public.dialogue(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict voUGZMDeRFHAl4uwn6k5nuvydm5bXHQF1xjja42GIIslXR4LKrbqFdKjQVrP7Fi

