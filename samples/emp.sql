-- The emp example of the source documents ("a mapping between RDBMS tables and the
-- Redis model"; samples/README.md): a table with a counter, a non-unique index and a unique index.
--
--   | emp_id | ename    | mgr_id | email           |
--   |      1 | SMITH    |      8 | foo@gmail.com   |
--   |      2 | ALLEN    |      8 | bar@163.com     |
--   |      3 | SALESMAN |      7 | zoo@hotmail.com |
--
-- In Redis (mappings/emp.yaml): emp:id = 3, emp:1 {ename: SMITH, mgr_id: 8, email: ...},
-- emp:indices:mgr_id:8 = {1, 2}, emp:indices:mgr_id:7 = {3},
-- emp:uniques:email = {foo@gmail.com: 1, bar@163.com: 2, zoo@hotmail.com: 3}.
--
-- mgr_id points at managers 7 and 8, who are not in the table, so it is a plain index and
-- not a foreign key.
--
-- Creates its table in the current database (MySQL 8 and MariaDB).

DROP TABLE IF EXISTS emp;

CREATE TABLE emp (
    emp_id INT          NOT NULL AUTO_INCREMENT,
    ename  VARCHAR(32)  NOT NULL,
    mgr_id INT          NULL,
    email  VARCHAR(128) NULL,
    PRIMARY KEY (emp_id),
    UNIQUE KEY uq_emp_email (email),
    KEY idx_emp_mgr_id (mgr_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO emp (emp_id, ename, mgr_id, email) VALUES
    (1, 'SMITH',    8, 'foo@gmail.com'),
    (2, 'ALLEN',    8, 'bar@163.com'),
    (3, 'SALESMAN', 7, 'zoo@hotmail.com');
