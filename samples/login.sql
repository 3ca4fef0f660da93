-- The user-login example of the source documents (samples/README.md): one table.
--
--   mysql> select * from login;
--   | user_id | name           | login_times | last_login_time     |
--   |       1 | ken thompson   |           5 | 2011-01-01 00:00:00 |
--   |       2 | dennis ritchie |           1 | 2011-02-01 00:00:00 |
--   |       3 | Joe Armstrong  |           2 | 2011-03-01 00:00:00 |
--
-- Users log in by name, hence the unique index on name. The two other indexes are the ones
-- the DBA in the story adds for "latest N logins" and "top N by login count"; in Redis they
-- become the list login:last_login_times and the sorted set login:login_times
-- (mappings/login.yaml).
--
-- Creates its table in the current database (MySQL 8 and MariaDB).

DROP TABLE IF EXISTS login;

CREATE TABLE login (
    user_id         INT          NOT NULL AUTO_INCREMENT,
    name            VARCHAR(64)  NOT NULL,
    login_times     INT          NOT NULL DEFAULT 0,
    last_login_time DATETIME     NOT NULL,
    PRIMARY KEY (user_id),
    UNIQUE KEY uq_login_name (name),
    KEY idx_login_last_login_time (last_login_time),
    KEY idx_login_login_times (login_times)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO login (user_id, name, login_times, last_login_time) VALUES
    (1, 'ken thompson',   5, '2011-01-01 00:00:00'),
    (2, 'dennis ritchie', 1, '2011-02-01 00:00:00'),
    (3, 'Joe Armstrong',  2, '2011-03-01 00:00:00');
