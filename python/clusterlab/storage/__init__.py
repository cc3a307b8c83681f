"""Storage clients (issue 13): ``iscsi``, an iSCSI initiator over libiscsi."""
