"""What a stack leaves behind when it is deleted, and what a failed create leaves: one policy per kind of resource.

KEPT is every data store's, key's and log group's: CloudFormation's DeletionPolicy RetainExceptOnCreate with
UpdateReplacePolicy Retain (aws-cdk-lib's RETAIN_ON_UPDATE_OR_DELETE). Deleting a stack, replacing a resource or
removing it from the template never deletes data; a create that fails and rolls back deletes what it made, so a
failed first deploy leaves nothing billing and nothing whose name is in the way of the retry (CloudFormation User
Guide, "DeletionPolicy attribute": https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-attribute-deletionpolicy.html).

KEPT_EVEN_IF_CREATE_FAILS (Retain) is for the two things a rollback must not take:
- an endpoint's log group: when an endpoint fails to start, SageMaker's reason ends "Please check CloudWatch logs for
  this endpoint" (as users report it: github.com/awslabs/llm-hosting-container/issues/18), and a rollback that deleted
  the group would delete the only record of why. Its name carries the stack's ID, so a retry never meets it.
- the key of log groups that are ensured by SDK calls (ensured_log_group.py): CloudFormation never deletes those
  groups, so their key must outlive a rollback too, or every SageMaker job of the account would log to a group whose
  key is pending deletion.

The FSx for Lustre file system is neither (lustre.py): it is a cache of the bucket, deleted with its stack.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy

KEPT = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
KEPT_EVEN_IF_CREATE_FAILS = RemovalPolicy.RETAIN
