PRAGMA user_version=1;
BEGIN;
CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY, task_id INTEGER NOT NULL);
INSERT INTO "idempotency_keys" VALUES('compat-key-1',1);
CREATE TABLE learned_peaks (
    profile TEXT PRIMARY KEY, max_peak_mib INTEGER NOT NULL, observations INTEGER NOT NULL,
    recent TEXT NOT NULL DEFAULT '');
CREATE TABLE nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL);
INSERT INTO "nodes" VALUES('compat-n1','{"address":"127.0.0.1:7071","cordoned":true,"cpu_milli":16000,"draining":false,"gpus":[["compat-gpu",16384],["compat-gpu",16384]],"labels":{"zone":"a"},"mem_mib":65536,"name":"compat-n1","taints":[],"v":1}');
CREATE TABLE quarantine (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, key TEXT NOT NULL,
    record TEXT, error TEXT NOT NULL);
CREATE TABLE quotas (
    team TEXT PRIMARY KEY, guaranteed_gpus INTEGER NOT NULL,
    guaranteed_gpu_mem_mib INTEGER NOT NULL, borrow_gpus INTEGER NOT NULL,
    max_priority TEXT NOT NULL DEFAULT '');
INSERT INTO "quotas" VALUES('ml',4,0,2,'high');
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY, record TEXT NOT NULL, state TEXT);
INSERT INTO "tasks" VALUES(1,'{"assigned_ms":0,"attempts":1,"base_pt":0,"claim":2,"exclusive":false,"exit_code":0,"fail_cnt":0,"finished_ms":0,"gpu_mem_need_mib":0,"history":[[1764892700000,0,"submitted"]],"id":1,"last_placement":{"cpu_milli":0,"exclusive":false,"gpu_mem_mib":[4096],"gpus":[0],"mem_mib":0,"node":"compat-n1"},"last_report":"","mem_source":"","placement_failures":0,"pt":0,"reason":"","seq":0,"spec":{"command":["sh","-c","exit 0"],"cpu_milli":0,"env":{"COMPAT":"1"},"gpu_mem_mib":4096,"gpu_model":"","gpus":1,"keep_pending":false,"mem_mib":0,"name":"compat","node_selector":{},"tolerations":[],"user":"alice"},"st":0,"state":3,"submitted_ms":0,"v":1}','succeeded');
CREATE TABLE tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL);
INSERT INTO "tokens" VALUES('compat0token1','{"admin":false,"created_ms":1764892600000,"id":"compat0token1","secret_sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","team":"ml","user":"alice","v":1}');
CREATE INDEX tasks_by_state ON tasks (state, id);
COMMIT;
