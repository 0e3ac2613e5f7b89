BEGIN TRANSACTION;
CREATE TABLE checkpoint (
	id INTEGER NOT NULL, 
	job_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	path TEXT NOT NULL, 
	metrics JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(job_id) REFERENCES job (id) ON DELETE CASCADE
);
INSERT INTO "checkpoint" VALUES(1,1,2,'/runs/1/step-2','{"reward": 0.5}','2026-11-25 12:00:00.000000');
CREATE TABLE comparison (
	id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	config JSON NOT NULL, 
	a_ref TEXT NOT NULL, 
	b_ref TEXT NOT NULL, 
	eval_runs JSON NOT NULL, 
	summary JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	error TEXT NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	PRIMARY KEY (id)
);
INSERT INTO "comparison" VALUES(1,'a vs b','{}','default','/runs/1/step-2','{"a": [1], "b": [1]}','{}','succeeded','','','2026-11-25 12:00:00.000000',NULL);
CREATE TABLE comparison_pair (
	id INTEGER NOT NULL, 
	comparison_id INTEGER NOT NULL, 
	persona_id VARCHAR(200) NOT NULL, 
	seed INTEGER NOT NULL, 
	a_dialogue_id INTEGER NOT NULL, 
	b_dialogue_id INTEGER NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (comparison_id, persona_id, seed), 
	FOREIGN KEY(comparison_id) REFERENCES comparison (id) ON DELETE CASCADE, 
	FOREIGN KEY(a_dialogue_id) REFERENCES dialogue (id), 
	FOREIGN KEY(b_dialogue_id) REFERENCES dialogue (id)
);
INSERT INTO "comparison_pair" VALUES(1,1,'maya',0,1,2);
CREATE TABLE dialogue (
	id INTEGER NOT NULL, 
	persona_id VARCHAR(64), 
	persona_snapshot JSON NOT NULL, 
	source VARCHAR(16) NOT NULL, 
	collection VARCHAR(200) NOT NULL, 
	external_id VARCHAR(128) NOT NULL, 
	policy_ref TEXT NOT NULL, 
	mode VARCHAR(8) NOT NULL, 
	simulator_fingerprint JSON NOT NULL, 
	fingerprint_hash VARCHAR(64) NOT NULL, 
	job_id INTEGER, 
	step INTEGER, 
	group_id VARCHAR(64) NOT NULL, 
	eval_run_id INTEGER, 
	status VARCHAR(16) NOT NULL, 
	final_emotion FLOAT, 
	outcome VARCHAR(16) NOT NULL, 
	error TEXT NOT NULL, 
	n_turns INTEGER NOT NULL, 
	seed INTEGER NOT NULL, 
	config JSON NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	PRIMARY KEY (id), 
	FOREIGN KEY(job_id) REFERENCES job (id), 
	FOREIGN KEY(eval_run_id) REFERENCES eval_run (id)
);
INSERT INTO "dialogue" VALUES(1,'maya','{"id": "maya"}','benchmark','','','default','direct','{}','ffffffffffffffff',1,2,'',1,'finished',55.0,'max_turns','',2,0,'{}','','2026-11-25 12:00:00.000000',NULL);
INSERT INTO "dialogue" VALUES(2,'tom-ü','{"id": "tom-\u00fc"}','benchmark','','','default','direct','{}','ffffffffffffffff',1,2,'',1,'finished',68.0,'max_turns','',2,1,'{}','','2026-11-25 12:00:00.000000',NULL);
CREATE TABLE eval_run (
	id INTEGER NOT NULL, 
	job_id INTEGER, 
	name VARCHAR(200) NOT NULL, 
	model_ref TEXT NOT NULL, 
	simulator_fingerprint JSON NOT NULL, 
	fingerprint_hash VARCHAR(64) NOT NULL, 
	profile_set_hash VARCHAR(64) NOT NULL, 
	protocol JSON NOT NULL, 
	config JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	score FLOAT, 
	success INTEGER, 
	failure INTEGER, 
	n INTEGER NOT NULL, 
	n_errors INTEGER NOT NULL, 
	ci_low FLOAT, 
	ci_high FLOAT, 
	seed INTEGER NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	PRIMARY KEY (id), 
	FOREIGN KEY(job_id) REFERENCES job (id)
);
INSERT INTO "eval_run" VALUES(1,1,'heldout','default','{"backend": "offline"}','ffffffffffffffff','','{}','{}','finished',61.5,1,0,2,0,40.0,80.0,0,'','2026-11-25 12:00:00.000000','2026-11-25 12:00:00.000000');
CREATE TABLE experiment (
	id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	base JSON NOT NULL, 
	grid JSON NOT NULL, 
	benchmark JSON NOT NULL, 
	judge JSON NOT NULL, 
	parallel INTEGER NOT NULL, 
	source TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	runner_pid INTEGER, 
	error TEXT NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	PRIMARY KEY (id)
);
INSERT INTO "experiment" VALUES(1,'lr grid','{}','{"lr": [1e-05, 2e-05]}','{}','{}',1,'','succeeded',NULL,'','','2026-11-25 12:00:00.000000',NULL);
CREATE TABLE experiment_cell (
	id INTEGER NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	"index" INTEGER NOT NULL, 
	params JSON NOT NULL, 
	config JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	train_job_id INTEGER, 
	benchmark_job_id INTEGER, 
	eval_run_id INTEGER, 
	error TEXT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (experiment_id, "index"), 
	FOREIGN KEY(experiment_id) REFERENCES experiment (id) ON DELETE CASCADE, 
	FOREIGN KEY(train_job_id) REFERENCES job (id), 
	FOREIGN KEY(benchmark_job_id) REFERENCES job (id), 
	FOREIGN KEY(eval_run_id) REFERENCES eval_run (id)
);
INSERT INTO "experiment_cell" VALUES(1,1,0,'{"lr": 1e-05}','{}','succeeded',1,NULL,1,'');
CREATE TABLE job (
	id INTEGER NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	config JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	pid INTEGER, 
	heartbeat_at DATETIME, 
	progress FLOAT NOT NULL, 
	step INTEGER NOT NULL, 
	total_steps INTEGER NOT NULL, 
	log_path TEXT NOT NULL, 
	output_dir TEXT NOT NULL, 
	error TEXT NOT NULL, 
	seed INTEGER NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	parent_id INTEGER, 
	created_at DATETIME NOT NULL, 
	started_at DATETIME, 
	finished_at DATETIME, 
	PRIMARY KEY (id), 
	FOREIGN KEY(parent_id) REFERENCES job (id)
);
INSERT INTO "job" VALUES(1,'train','grpo demo','{"algorithm": "grpo", "lr": 1e-05}','succeeded',NULL,NULL,1.0,2,2,'','','',7,'d29f43a',NULL,'2026-11-25 12:00:00.000000',NULL,NULL);
CREATE TABLE judge_score (
	id INTEGER NOT NULL, 
	dialogue_id INTEGER NOT NULL, 
	eval_run_id INTEGER, 
	judge_fingerprint JSON NOT NULL, 
	judge_hash VARCHAR(64) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	error_kind VARCHAR(16) NOT NULL, 
	error TEXT NOT NULL, 
	scores JSON NOT NULL, 
	reasons JSON NOT NULL, 
	mean FLOAT, 
	raw TEXT NOT NULL, 
	attempts INTEGER NOT NULL, 
	latency_s FLOAT NOT NULL, 
	n_tokens INTEGER NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (dialogue_id, judge_hash), 
	FOREIGN KEY(dialogue_id) REFERENCES dialogue (id) ON DELETE CASCADE, 
	FOREIGN KEY(eval_run_id) REFERENCES eval_run (id)
);
INSERT INTO "judge_score" VALUES(1,1,1,'{}','jjjjjjjjjjjjjjjj','ok','','','{"empathy": 4}','{"empathy": "named the feeling"}',4.0,'',1,0.0,0,'','2026-11-25 12:00:00.000000');
CREATE TABLE metric (
	id INTEGER NOT NULL, 
	job_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	value FLOAT NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (job_id, step, name), 
	FOREIGN KEY(job_id) REFERENCES job (id) ON DELETE CASCADE
);
INSERT INTO "metric" VALUES(1,1,1,'reward',0.25,'2026-11-25 12:00:00.000000');
INSERT INTO "metric" VALUES(2,1,2,'reward',0.5,'2026-11-25 12:00:00.000000');
INSERT INTO "metric" VALUES(3,1,2,'kl',0.012,'2026-11-25 12:00:00.000000');
CREATE TABLE persona (
	id VARCHAR(64) NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	language VARCHAR(8) NOT NULL, 
	persona TEXT NOT NULL, 
	background TEXT NOT NULL, 
	explicit_goal TEXT NOT NULL, 
	hidden_need TEXT NOT NULL, 
	need_category VARCHAR(32) NOT NULL, 
	personality VARCHAR(16) NOT NULL, 
	traits JSON NOT NULL, 
	first_line TEXT NOT NULL, 
	difficulty VARCHAR(16) NOT NULL, 
	source VARCHAR(32) NOT NULL, 
	extra JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "persona" VALUES('maya','Maya','en','Maya, a nurse','','','','','','["proud", "tired"]','','standard','user','{"events": ["e1", "e2"]}','2026-11-25 12:00:00.000000','2026-11-25 12:00:00.000000');
INSERT INTO "persona" VALUES('tom-ü','Tomás ü','en','Tomás ü, a nurse','','','','','','["proud", "tired"]','','standard','user','{"events": ["e1", "e2"]}','2026-11-25 12:00:00.000000','2026-11-25 12:00:00.000000');
CREATE TABLE persona_candidate (
	id INTEGER NOT NULL, 
	generation_id INTEGER NOT NULL, 
	slot INTEGER NOT NULL, 
	"plan" JSON NOT NULL, 
	profile JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	validation_error TEXT NOT NULL, 
	lint_warnings INTEGER NOT NULL, 
	lint JSON NOT NULL, 
	similarity FLOAT, 
	nearest_id VARCHAR(64) NOT NULL, 
	persona_id VARCHAR(64) NOT NULL, 
	raw TEXT NOT NULL, 
	attempts INTEGER NOT NULL, 
	regenerated INTEGER NOT NULL, 
	latency_s FLOAT NOT NULL, 
	n_tokens INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (generation_id, slot), 
	FOREIGN KEY(generation_id) REFERENCES persona_generation (id) ON DELETE CASCADE
);
INSERT INTO "persona_candidate" VALUES(1,1,0,'{}','{"id": "cand"}','accepted','',0,'[]',0.42,'','maya','',0,0,0.0,0,'2026-11-25 12:00:00.000000','2026-11-25 12:00:00.000000');
CREATE TABLE persona_generation (
	id INTEGER NOT NULL, 
	endpoint VARCHAR(200) NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	prompt_version VARCHAR(32) NOT NULL, 
	prompt_sha256 VARCHAR(64) NOT NULL, 
	spec JSON NOT NULL, 
	settings JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	n_planned INTEGER NOT NULL, 
	n_done INTEGER NOT NULL, 
	error TEXT NOT NULL, 
	seed INTEGER NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	PRIMARY KEY (id)
);
INSERT INTO "persona_generation" VALUES(1,'127.0.0.1:8000','m','','','{}','{}','finished',1,1,'',0,'','2026-11-25 12:00:00.000000','2026-11-25 12:00:00.000000');
CREATE TABLE persona_set (
	id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	content_hash VARCHAR(64) NOT NULL, 
	source_kind VARCHAR(16) NOT NULL, 
	params JSON NOT NULL, 
	code_version VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);
INSERT INTO "persona_set" VALUES(1,'pair','cccccccccccccccc','manual','{}','','2026-11-25 12:00:00.000000');
CREATE TABLE persona_set_member (
	id INTEGER NOT NULL, 
	set_id INTEGER NOT NULL, 
	position INTEGER NOT NULL, 
	persona_id VARCHAR(64) NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (set_id, position), 
	UNIQUE (set_id, persona_id), 
	FOREIGN KEY(set_id) REFERENCES persona_set (id) ON DELETE CASCADE
);
INSERT INTO "persona_set_member" VALUES(1,1,0,'maya');
INSERT INTO "persona_set_member" VALUES(2,1,1,'tom-ü');
CREATE TABLE store_meta (
	"key" VARCHAR(64) NOT NULL, 
	value TEXT NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO "store_meta" VALUES('store_id','686a9db01706');
CREATE TABLE turn (
	id INTEGER NOT NULL, 
	dialogue_id INTEGER NOT NULL, 
	"index" INTEGER NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	text TEXT NOT NULL, 
	think_text TEXT NOT NULL, 
	emotion FLOAT, 
	delta FLOAT, 
	"inner" JSON NOT NULL, 
	n_tokens INTEGER NOT NULL, 
	latency_s FLOAT NOT NULL, 
	error TEXT NOT NULL, 
	policy_version INTEGER, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (dialogue_id, "index"), 
	FOREIGN KEY(dialogue_id) REFERENCES dialogue (id) ON DELETE CASCADE
);
INSERT INTO "turn" VALUES(1,1,0,'user','Hi. Rough day.','',40.0,0.0,'{"analysis": "tired"}',0,0.0,'',NULL,'2026-11-25 12:00:00.000000');
INSERT INTO "turn" VALUES(2,1,1,'assistant','That sounds hard — what happened?','',NULL,NULL,'{}',9,0.25,'',1,'2026-11-25 12:00:00.000000');
INSERT INTO "turn" VALUES(3,1,2,'user','我被跳过了。','',48.0,8.0,'{}',0,0.0,'',NULL,'2026-11-25 12:00:00.000000');
INSERT INTO "turn" VALUES(4,2,0,'user','Hi. Rough day.','',40.0,0.0,'{"analysis": "tired"}',0,0.0,'',NULL,'2026-11-25 12:00:00.000000');
INSERT INTO "turn" VALUES(5,2,1,'assistant','That sounds hard — what happened?','',NULL,NULL,'{}',9,0.25,'',1,'2026-11-25 12:00:00.000000');
INSERT INTO "turn" VALUES(6,2,2,'user','我被跳过了。','',48.0,8.0,'{}',0,0.0,'',NULL,'2026-11-25 12:00:00.000000');
CREATE INDEX ix_job_status ON job (status);
CREATE INDEX ix_experiment_status ON experiment (status);
CREATE INDEX ix_eval_run_fingerprint_hash ON eval_run (fingerprint_hash);
CREATE INDEX ix_metric_job_name ON metric (job_id, name);
CREATE INDEX ix_checkpoint_job_id ON checkpoint (job_id);
CREATE INDEX ix_persona_set_member_set_id ON persona_set_member (set_id);
CREATE INDEX ix_persona_candidate_status ON persona_candidate (status);
CREATE INDEX ix_persona_candidate_generation_id ON persona_candidate (generation_id);
CREATE INDEX ix_dialogue_job_id ON dialogue (job_id);
CREATE INDEX ix_dialogue_fingerprint_hash ON dialogue (fingerprint_hash);
CREATE INDEX ix_dialogue_eval_run_id ON dialogue (eval_run_id);
CREATE INDEX ix_dialogue_persona_id ON dialogue (persona_id);
CREATE INDEX ix_dialogue_collection ON dialogue (collection);
CREATE INDEX ix_experiment_cell_train_job_id ON experiment_cell (train_job_id);
CREATE INDEX ix_experiment_cell_benchmark_job_id ON experiment_cell (benchmark_job_id);
CREATE INDEX ix_experiment_cell_experiment_id ON experiment_cell (experiment_id);
CREATE INDEX ix_turn_dialogue_id ON turn (dialogue_id);
CREATE INDEX ix_judge_score_dialogue_id ON judge_score (dialogue_id);
CREATE INDEX ix_judge_score_judge_hash ON judge_score (judge_hash);
CREATE INDEX ix_judge_score_eval_run_id ON judge_score (eval_run_id);
CREATE INDEX ix_comparison_pair_comparison_id ON comparison_pair (comparison_id);
COMMIT;
