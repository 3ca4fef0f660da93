# RESP for the emp benchmark keys, from `mariadb -B -N` lines (tab-separated, NULL as NULL):
# HSET emp:<id> (non-NULL fields), HSET emp:uniques:email, SADD emp:indices:mgr_id:<m>,
# and SET emp:id <last id> at the end. Run with LC_ALL=C so length() counts bytes.
BEGIN { FS = "\t"; split("emp_id ename email mgr_id hired salary note", name, " ") }
function bulk(s) { return "$" length(s) "\r\n" s "\r\n" }
{
    n = 0; args = ""
    for (i = 2; i <= 7; i++) if ($i != "NULL") { n++; args = args bulk(name[i]) bulk($i) }
    printf "*%d\r\n$4\r\nHSET\r\n%s%s", 2 + 2 * n, bulk("emp:" $1), args
    printf "*4\r\n$4\r\nHSET\r\n%s%s%s", bulk("emp:uniques:email"), bulk($3), bulk($1)
    if ($4 != "NULL") printf "*3\r\n$4\r\nSADD\r\n%s%s", bulk("emp:indices:mgr_id:" $4), bulk($1)
    last = $1
}
END { if (last != "") printf "*3\r\n$3\r\nSET\r\n%s%s", bulk("emp:id"), bulk(last) }
